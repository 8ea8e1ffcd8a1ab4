"""`autograd-fix doctor`: find autograd bugs by watching a bounded run of the user's script.

`watch` (hooks, in the run child), `child` (the run), `job` (in the worker), `findings`
(records to findings, torch-free), `diagnose` (the tool side).
"""
