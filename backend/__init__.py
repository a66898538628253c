"""The FastAPI service behind `uopviz serve`: JSON over HTTP for recorded traces, and the web UI.

Nothing in `uopviz/` imports this package (it brings FastAPI and pydantic); `uopviz serve` imports it on use.
Start at `backend.app.create_app` (the routes) and `backend.store.TraceStore` (the traces it serves).
"""
