"""Llama 3.x JSON calls: bare objects with the arguments under "parameters", opening the message, "; " between.

    {"name": "get_weather", "parameters": {"city": "Paris"}}; {"name": "get_time", "parameters": {...}}
"""
from __future__ import annotations

from agents.tool_formats.json_call import JsonCallFormat
from agents.tools.parsers.llama3 import Llama3Parser


class Llama3Format(JsonCallFormat):
    name = "llama3"
    parser = Llama3Parser
    ARGUMENTS_KEY = "parameters"
    INSTRUCTION = ("To call functions, answer with one JSON object per call, separated by \"; \", and nothing "
                   'else:\n{"name": <function name>, "parameters": <arguments object>}')
    SEPARATOR = "; "
