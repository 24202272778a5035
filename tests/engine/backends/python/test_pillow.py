"""Pillow is in the Python backend's environment (a core dependency, as Triton's image ships it): a python
model that imports PIL at module level decodes the PNG bytes a client sends as a BYTES tensor, served and
called with tritonclient over HTTP."""
from __future__ import annotations

import io
import textwrap

import numpy as np
import pytest
import tritonclient.http as httpclient
from PIL import Image

from tests.gateway.kserve.triton_repo import start_triton

CONFIG = '''name: "thumbnail"
backend: "python"
max_batch_size: 0
input [ { name: "IMAGE", data_type: TYPE_STRING, dims: [ 1 ] } ]
output [
  { name: "SIZE", data_type: TYPE_INT32, dims: [ 2 ] },
  { name: "PIXELS", data_type: TYPE_UINT8, dims: [ -1, -1, 3 ] }
]
'''
MODEL = '''
    import io

    import numpy as np
    import triton_python_backend_utils as pb_utils
    from PIL import Image

    class TritonPythonModel:
        def execute(self, requests):
            out = []
            for request in requests:
                data = pb_utils.get_input_tensor_by_name(request, "IMAGE").as_numpy().reshape(-1)[0]
                image = Image.open(io.BytesIO(data)).convert("RGB")
                small = image.resize((image.width // 2, image.height // 2))
                out.append(pb_utils.InferenceResponse([
                    pb_utils.Tensor("SIZE", np.array(image.size, dtype=np.int32)),
                    pb_utils.Tensor("PIXELS", np.asarray(small, dtype=np.uint8))]))
            return out
'''


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("repo")
    (root / "thumbnail" / "1").mkdir(parents=True)
    (root / "thumbnail" / "config.pbtxt").write_text(CONFIG)
    (root / "thumbnail" / "1" / "model.py").write_text(textwrap.dedent(MODEL))
    server = start_triton(root)
    yield server
    server.stop()


def test_a_python_model_decodes_an_image_tensor_with_pil(server):
    pixels = np.zeros((6, 8, 3), dtype=np.uint8)
    pixels[:, :4] = (255, 0, 0)                                # left half red, right half black
    png = io.BytesIO()
    Image.fromarray(pixels).save(png, format="PNG")
    image = httpclient.InferInput("IMAGE", [1], "BYTES")
    image.set_data_from_numpy(np.array([png.getvalue()], dtype=np.object_))
    client = httpclient.InferenceServerClient(server.url.removeprefix("http://"))
    result = client.infer("thumbnail", [image])
    assert result.as_numpy("SIZE").tolist() == [8, 6]                 # PIL's (width, height)
    small = result.as_numpy("PIXELS")
    assert small.shape == (3, 4, 3)
    assert small[:, 0].tolist() == [[255, 0, 0]] * 3 and small[:, -1].tolist() == [[0, 0, 0]] * 3
