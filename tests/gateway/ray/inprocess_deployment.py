"""The Ray Serve + Triton integration's deployment, its `tritonserver` import replaced by Conch's in-process
API: a replica embeds the server and answers GET /generate?query=... through the repository's ensemble, and an
OpenAI-style POST /v1/chat/completions through the same model. Run as a driver:
`python -m tests.gateway.ray.inprocess_deployment RAY_ADDRESS HTTP_PORT REPOSITORY`."""

import sys
import time

import numpy as np
from fastapi import FastAPI, HTTPException
from pydantic import BaseModel
from ray import serve

from conch.gateway import server as tritonserver

app = FastAPI()


class ChatRequest(BaseModel):
    messages: list[dict]
    max_tokens: int = 16


@serve.deployment(ray_actor_options={"num_cpus": 0.5})
@serve.ingress(app)
class TritonDeployment:
    def __init__(self, repository: str) -> None:
        self._server = tritonserver.Server(tritonserver.Options(model_repository=repository, log_info=True))
        self._server.start(wait_until_ready=True)
        self._model = self._server.model("ensemble")

    def _generate(self, query: str, max_tokens: int) -> str:
        if not self._model.ready():
            raise HTTPException(503, "model not ready")
        responses = self._model.infer(inputs={"text_input": [[query]],
                                              "max_tokens": np.array([[max_tokens]], dtype=np.int32)})
        return list(responses)[0].outputs["text_output"].to_string_array().reshape(-1)[0]

    @app.get("/generate")
    def generate(self, query: str) -> str:
        return self._generate(query, 16)

    @app.post("/v1/chat/completions")
    def chat(self, request: ChatRequest) -> dict:
        text = self._generate(str(request.messages[-1].get("content", "")), request.max_tokens)
        return {"object": "chat.completion", "model": "ensemble",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                             "finish_reason": "stop"}]}


if __name__ == "__main__":
    import ray

    address, port, repository = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    ray.init(address=address)
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    serve.run(TritonDeployment.bind(repository), route_prefix="/")
    print("DEPLOYED", flush=True)
    while True:
        time.sleep(3600)
