"""The faces: HTTP (FastAPI) and gRPC servers, wire schemas, auth, rate limits, metrics exposition (the app:
app.py's build_app; `conch serve`: cli.py)."""
