"""The FastAPI service behind `uopviz serve`: JSON over HTTP for recorded traces, and the web UI.

Nothing below the top layer imports this package (it brings pydantic, and app.py FastAPI); `uopviz serve` and the
notebook widget (uopviz.widget, which answers through backend.answers) import it on use.
Start at `backend.app.create_app` (the routes) and `backend.store.TraceStore` (the traces it serves).
"""
