"""What every format's parser reads with: the parser machine (parser.py), finding markup in content
(content.py), the streaming readers of a JSON value (reader.py, json_reader.py), of a JSON call object
(call_object.py) and of a Python keyword call (python_call.py), and the sink that turns a call being read into
stream events (call_sink.py)."""
