// Widgets in jupyterlab-rise's slideshow page.
//
// RISE's slideshow (/rise/<notebook>) is an app of its own, built from JupyterLab 4.3.4 modules
// without @jupyterlab/console. ipywidgets 8's widget manager (@jupyter-widgets/jupyterlab-manager)
// imports that module, so on that page it fails to load ("Shared module @jupyterlab/console
// doesn't exist in shared scope default"), and with it every widget, anywidget included
// (jupyterlab-contrib/rise#119, #126).
//
// Importing @jupyterlab/console here makes this extension bundle that module (4.3.4, the version
// of RISE's other modules) and offer it to whatever page loads it. JupyterLab itself has its own,
// newer copy, which wins there: in JupyterLab this extension changes nothing.
import { IConsoleTracker } from '@jupyterlab/console';

const plugin = {
  id: 'mha-course-rise-widgets:console',
  description: 'Offers @jupyterlab/console to RISE so that the widget manager loads there.',
  autoStart: true,
  optional: [IConsoleTracker],
  activate: () => {}
};

export default plugin;
