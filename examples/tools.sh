#!/usr/bin/env bash
# A tool call with curl against `make run`: tool_choice "required" always yields a valid call.
curl -s http://127.0.0.1:8000/v1/chat/completions -H 'Content-Type: application/json' -d '{
  "model": "smollm2-135m-instruct",
  "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
  "tools": [{"type": "function", "function": {"name": "get_weather",
             "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
  "tool_choice": "required", "max_tokens": 60
}'
echo
