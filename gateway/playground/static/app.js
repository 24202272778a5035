// The Conch playground: a chat over /v1/chat/completions (streamed), nothing but the public API.
// State: `history` holds the OpenAI messages of the conversation; the page shows them and the next request.
"use strict";

const $ = (id) => document.getElementById(id);
const history = [];
let controller = null;
let lastBody = null;        // the request last sent (what the curl box shows while the prompt is empty)

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = $("api-key").value.trim();
  if (key) h["Authorization"] = `Bearer ${key}`;
  return h;
}

function mode() {
  return document.querySelector("input[name=mode]:checked").value;
}

function setStatus(text, isError = false) {
  $("status").textContent = text;
  $("status").className = isError ? "error" : "";
}

async function loadModels() {
  const select = $("model");
  const previous = select.value || localStorage.getItem("conch.model");
  try {
    const r = await fetch("/v1/models", { headers: headers() });
    const body = await r.json();
    if (!r.ok) throw new Error(body.error?.message || r.statusText);
    // only the models that chat (an embedding model is listed by /v1/models, but cannot answer here)
    const chat = body.data.filter((m) => (m.endpoints || ["chat.completions"]).includes("chat.completions"));
    select.replaceChildren(...chat.map((m) => new Option(m.id, m.id)));
    if (previous && chat.some((m) => m.id === previous)) select.value = previous;
    setStatus(`${chat.length} model(s)`);
  } catch (err) {
    select.replaceChildren();
    setStatus(`models: ${err.message}`, true);
  }
  renderCurl();
}

// The request the Send button would make now (with `pending` as the next user message).
function buildBody(pending) {
  const body = {
    model: $("model").value,
    messages: pending === undefined ? history.slice() : [...history, { role: "user", content: pending }],
    stream: true,
    temperature: Number($("temperature").value),
    max_tokens: Number($("max-tokens").value),
  };
  if (mode() === "schema") {
    body.response_format = { type: "json_schema",
                             json_schema: { name: "playground", schema: JSON.parse($("schema").value), strict: true } };
  } else if (mode() === "tools") {
    body.tools = JSON.parse($("tools").value);
    const choice = $("tool-choice").value;
    body.tool_choice = choice.startsWith("function:")
      ? { type: "function", function: { name: choice.slice("function:".length) } } : choice;
  }
  return body;
}

function shellQuote(text) {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

function renderCurl() {
  let text;
  try {
    const prompt = $("prompt").value.trim();
    const body = prompt || !lastBody ? buildBody(prompt || "Hello!") : lastBody;
    const auth = $("api-key").value.trim() ? ` \\\n  -H "Authorization: Bearer $CONCH_API_KEY"` : "";
    text = `curl -N ${location.origin}/v1/chat/completions \\\n  -H 'Content-Type: application/json'${auth} \\\n` +
           `  -d ${shellQuote(JSON.stringify(body, null, 2))}`;
  } catch (err) {
    text = `# not valid JSON yet: ${err.message}`;
  }
  $("curl").textContent = text;
}

function addMessage(role, text = "") {
  const div = document.createElement("div");
  div.className = `msg ${role}`;
  const label = document.createElement("span");
  label.className = "role";
  label.textContent = role;
  const content = document.createElement("span");
  content.className = "content";
  content.textContent = text;
  div.append(label, content);
  $("messages").append(div);
  $("messages").scrollTop = $("messages").scrollHeight;
  return div;
}

// Server-sent events from a fetch body: yields each `data:` payload (a JSON object, or "[DONE]").
async function* events(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      for (const line of event.split("\n")) {
        if (line.startsWith("data:")) yield line.slice(5).trim();
      }
    }
  }
}

// One assistant turn as it streams: text and tool calls (accumulated by index, as OpenAI streams them).
class Turn {
  constructor(div) {
    this.div = div;
    this.content = div.querySelector(".content");
    this.text = "";
    this.calls = [];
    this.chunks = 0;
    div.dataset.streaming = "true";
  }

  add(delta) {
    if (delta.content) {
      this.text += delta.content;
      this.content.textContent = this.text;
      this.chunks += 1;
      this.div.dataset.chunks = String(this.chunks);
    }
    for (const call of delta.tool_calls || []) {
      const slot = this.calls[call.index] ||= { id: call.id, type: "function", function: { name: "", arguments: "" } };
      if (call.id) slot.id = call.id;
      if (call.function?.name) slot.function.name += call.function.name;
      if (call.function?.arguments) slot.function.arguments += call.function.arguments;
      this.chunks += 1;
      this.div.dataset.chunks = String(this.chunks);
      this.showCalls();
    }
  }

  showCalls() {
    this.div.querySelectorAll(".tool-call").forEach((e) => e.remove());
    for (const call of this.calls) {
      const box = document.createElement("div");
      box.className = "tool-call";
      box.textContent = `${call.function.name}(${call.function.arguments})`;
      this.div.append(box);
    }
  }

  finish() {
    this.div.dataset.streaming = "false";
    const message = { role: "assistant", content: this.text };
    if (this.calls.length) message.tool_calls = this.calls;
    return message;
  }
}

async function send(event) {
  event.preventDefault();
  const prompt = $("prompt").value.trim();
  if (!prompt || controller) return;
  let body;
  try {
    body = buildBody(prompt);
  } catch (err) {
    setStatus(`${mode() === "schema" ? "schema" : "tools"}: ${err.message}`, true);
    return;
  }
  lastBody = body;
  history.push({ role: "user", content: prompt });
  addMessage("user", prompt);
  $("prompt").value = "";
  renderCurl();
  const turn = new Turn(addMessage("assistant"));
  controller = new AbortController();
  $("send").disabled = true;
  $("stop").disabled = false;
  setStatus("streaming…");
  let failed = false;
  try {
    const r = await fetch("/v1/chat/completions", { method: "POST", headers: headers(), body: JSON.stringify(body),
                                                    signal: controller.signal });
    if (!r.ok) {
      const err = await r.json().catch(() => ({}));
      throw new Error(err.error?.message || `${r.status} ${r.statusText}`);
    }
    for await (const data of events(r)) {
      if (data === "[DONE]") break;
      const chunk = JSON.parse(data);
      if (chunk.error) throw new Error(chunk.error.message || "stream error");
      for (const choice of chunk.choices || []) turn.add(choice.delta || {});
    }
  } catch (err) {
    failed = true;
    setStatus(err.name === "AbortError" ? "stopped" : err.message, err.name !== "AbortError");
  } finally {
    history.push(turn.finish());
    controller = null;
    $("send").disabled = false;
    $("stop").disabled = true;
  }
  if (!failed) setStatus(verdict(turn));
}

function verdict(turn) {
  if (mode() === "schema") {
    try {
      JSON.parse(turn.text);
      return `done: valid JSON (${turn.chunks} chunks)`;
    } catch (err) {
      return `done: not JSON: ${err.message}`;
    }
  }
  if (turn.calls.length) return `done: ${turn.calls.length} tool call(s)`;
  return `done (${turn.chunks} chunks)`;
}

// tool_choice offers auto / required / none and each defined function by name.
function refreshToolChoice() {
  const select = $("tool-choice");
  const keep = select.value;
  let names = [];
  try {
    names = JSON.parse($("tools").value).map((t) => t.function?.name).filter(Boolean);
  } catch {
    return;                                   // not valid JSON yet: keep the current options
  }
  const options = ["auto", "required", "none", ...names.map((n) => `function:${n}`)];
  select.replaceChildren(...options.map((v) => new Option(v.replace("function:", "function: "), v)));
  select.value = options.includes(keep) ? keep : "auto";
}

function switchMode() {
  $("schema-box").hidden = mode() !== "schema";
  $("tools-box").hidden = mode() !== "tools";
  renderCurl();
}

function init() {
  $("api-key").value = localStorage.getItem("conch.key") || "";
  $("api-key").addEventListener("change", () => {
    localStorage.setItem("conch.key", $("api-key").value.trim());
    loadModels();
  });
  $("model").addEventListener("change", () => { localStorage.setItem("conch.model", $("model").value); renderCurl(); });
  document.querySelectorAll("input[name=mode]").forEach((r) => r.addEventListener("change", switchMode));
  for (const id of ["temperature", "max-tokens", "schema", "tools", "tool-choice", "prompt"]) {
    $(id).addEventListener("input", renderCurl);
  }
  $("tools").addEventListener("input", refreshToolChoice);
  refreshToolChoice();
  $("composer").addEventListener("submit", send);
  $("prompt").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) send(e);
  });
  $("stop").addEventListener("click", () => controller?.abort());
  $("clear").addEventListener("click", () => {
    history.length = 0;
    lastBody = null;
    $("messages").replaceChildren();
    setStatus("");
    renderCurl();
  });
  switchMode();
  loadModels();
}

init();
