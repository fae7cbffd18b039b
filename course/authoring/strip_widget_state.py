"""Drop saved widget state from notebooks:
`python -m course.authoring.strip_widget_state NOTEBOOK...`.

JupyterLab never draws a panel from saved state (before Run All it shows the panel's one-line
text instead), so the state would only add the panels' float32 frames to git.
"""

import json
import sys


def main(paths: list[str]) -> None:
    for path in paths:
        with open(path, encoding="utf-8") as f:
            notebook = json.load(f)
        if notebook.get("metadata", {}).pop("widgets", None) is not None:
            with open(path, "w", encoding="utf-8") as f:
                json.dump(notebook, f, indent=1, ensure_ascii=False)
                f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1:])
