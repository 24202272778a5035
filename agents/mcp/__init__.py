"""MCP tools run by the gateway: sessions with MCP servers, the policy that says which may be reached, the
admin's registry of servers, and the loop that runs a model's MCP calls until it answers."""
