// A real model behind the wire formats the project's backends and the agent CLIs speak
// (docs/realmodel.md): OpenAI Chat Completions (/v1/chat/completions), Anthropic Messages
// (/v1/messages) and OpenAI Responses (/v1/responses, Codex's), each non-streaming and streaming
// (SSE), plus /v1/models. node-llama-cpp runs
// the GGUF on the CPU. Requests are served one at a time on one context sequence, and a request
// whose prompt starts like the previous one re-evaluates only the part that differs (an agent
// CLI's ~8k-token system prompt is evaluated once).
//
//   node serve.mjs --model FILE [--threads N] [--context N] [--seed N] [--parent-pid PID]
//
// Prints {"port": ..., "threads": ..., "context": ...} as the first stdout line once it listens
// on 127.0.0.1 (port 0: the system picks). Sampling: `temperature` as the request gives it,
// else the API's documented default (1.0 for all three APIs); 0 is greedy. The seed is --seed (42)
// plus the request's x-skillopt-sample header (so the k samples of a rollout differ, each
// reproducibly); an OpenAI request's own `seed` wins. `max_tokens` (OpenAI also
// `max_completion_tokens`, Responses `max_output_tokens`) bounds the answer. Tools are not offered to the model: tool calls and
// results in the history are rendered as text. Exits when --parent-pid dies.
import http from "node:http";
import os from "node:os";
import { parseArgs } from "node:util";
import { getLlama, LlamaChat } from "node-llama-cpp";

const { values: opt } = parseArgs({
  options: {
    model: { type: "string" },
    threads: { type: "string" },
    context: { type: "string", default: "12288" },
    seed: { type: "string", default: "42" },
    "parent-pid": { type: "string" },
    port: { type: "string", default: "0" },
  },
});
if (!opt.model) {
  console.error("serve.mjs: --model FILE is required");
  process.exit(2);
}
const threads = opt.threads ? Number(opt.threads) : os.loadavg()[0] > 1.5 ? 1 : 2;
const contextSize = Number(opt.context);
const baseSeed = Number(opt.seed);
const MODEL_ID = "qwen2.5-coder-1.5b-instruct";
const DEFAULT_TEMPERATURE = 1.0; // OpenAI Chat Completions and Anthropic Messages both document 1
const DEFAULT_MAX_TOKENS = 1024;

let busy = false; // a generation is running
// an exit waits for the native evaluation in flight (a prompt batch can take minutes on a
// loaded machine): while one runs, stop at once instead
const stop = () => (busy ? process.kill(process.pid, "SIGKILL") : process.exit(0));
if (opt["parent-pid"]) {
  const parent = Number(opt["parent-pid"]);
  setInterval(() => {
    try {
      process.kill(parent, 0);
    } catch {
      stop();
    }
  }, 1000);
}
for (const sig of ["SIGTERM", "SIGINT"]) process.on(sig, stop);

const llama = await getLlama({ gpu: false, build: "never", logLevel: "error", maxThreads: threads });
const model = await llama.loadModel({ modelPath: opt.model, gpuLayers: 0 });
const context = await model.createContext({ contextSize, threads, sequences: 1 });
const chat = new LlamaChat({ contextSequence: context.getSequence() });

// ---- request → chat history ----------------------------------------------------------
function text(content) {
  if (content == null) return "";
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map(text).filter(Boolean).join("\n");
  if (typeof content === "object") {
    if (content.type === "tool_use") return `[called tool ${content.name} with ${JSON.stringify(content.input ?? {})}]`;
    if (content.type === "tool_result") return `[tool result]\n${text(content.content)}`;
    if (content.type === "image" || content.type === "image_url") return "";
    if (typeof content.text === "string") return content.text;
    if (content.content !== undefined) return text(content.content);
  }
  return "";
}

function toHistory(system, turns) {
  // turns: [["user" | "model", text]], merged when a role repeats
  const history = [];
  if (system.trim()) history.push({ type: "system", text: system });
  for (const [role, body] of turns) {
    const last = history.at(-1);
    if (role === "user") {
      if (last?.type === "user") last.text += "\n\n" + body;
      else history.push({ type: "user", text: body });
    } else if (last?.type === "model") last.response[0] += "\n\n" + body;
    else history.push({ type: "model", response: [body] });
  }
  if (history.at(-1)?.type !== "model") history.push({ type: "model", response: [] });
  return history;
}

function openaiHistory(body) {
  let system = "";
  const turns = [];
  for (const m of body.messages ?? []) {
    const role = m.role ?? "user";
    if (role === "system" || role === "developer") system += (system ? "\n\n" : "") + text(m.content);
    else if (role === "assistant") {
      const calls = (m.tool_calls ?? []).map(
        (c) => `[called tool ${c.function?.name} with ${c.function?.arguments ?? "{}"}]`,
      );
      turns.push(["model", [text(m.content), ...calls].filter(Boolean).join("\n")]);
    } else if (role === "tool" || role === "function") turns.push(["user", `[tool result]\n${text(m.content)}`]);
    else turns.push(["user", text(m.content)]);
  }
  return toHistory(system, turns);
}

function responsesHistory(body) {
  let system = text(body.instructions);
  const turns = [];
  const items = typeof body.input === "string" ? [{ role: "user", content: body.input }] : body.input ?? [];
  for (const item of items) {
    const kind = item.type ?? "message";
    if (kind === "message" && (item.role === "system" || item.role === "developer")) {
      system += (system ? "\n\n" : "") + text(item.content);
    } else if (kind === "message") turns.push([item.role === "assistant" ? "model" : "user", text(item.content)]);
    else if (kind.endsWith("_call_output")) turns.push(["user", `[tool result]\n${text(item.output)}`]);
    else if (kind.endsWith("_call")) {
      turns.push(["model", `[called tool ${item.name ?? kind} with ${item.arguments ?? JSON.stringify(item.input ?? item.action ?? {})}]`]);
    } // reasoning items and the like carry no text for the model
  }
  return toHistory(system, turns);
}

function anthropicHistory(body) {
  const turns = (body.messages ?? []).map((m) => [m.role === "assistant" ? "model" : "user", text(m.content)]);
  return toHistory(text(body.system), turns);
}

// ---- generation (one at a time) -----------------------------------------------------------
let queue = Promise.resolve();
function serial(fn) {
  const run = queue.then(fn, fn);
  queue = run.catch(() => {});
  return run;
}

function countTokens(history) {
  try {
    const { contextText } = chat.chatWrapper.generateContextState({ chatHistory: history });
    return contextText.tokenize(model.tokenizer).length;
  } catch {
    return model.tokenize(JSON.stringify(history)).length;
  }
}

function sampling(req, body, maxTokens) {
  const sample = Math.max(0, Number.parseInt(req.headers["x-skillopt-sample"] ?? "0", 10) || 0);
  const temperature = typeof body.temperature === "number" ? body.temperature : DEFAULT_TEMPERATURE;
  const seed = Number.isInteger(body.seed) ? body.seed : baseSeed + sample;
  const out = { temperature, seed, maxTokens: Math.max(1, Math.min(maxTokens, contextSize)) };
  if (typeof body.top_p === "number") out.topP = body.top_p;
  if (typeof body.top_k === "number") out.topK = body.top_k;
  return out;
}

const BEAT_MS = 5000;

// `beat` (streaming only) is called every BEAT_MS while the answer runs: a long prompt is
// evaluated before the first token, and the CLIs drop a stream that stays silent (Claude Code
// 2.1.328 has a byte-stream idle watchdog)
async function generate(history, options, stops, onText, signal, beat) {
  const started = performance.now();
  busy = true;
  const beating = beat ? setInterval(beat, BEAT_MS) : undefined;
  let res;
  try {
    res = await chat.generateResponse(history, {
      ...options,
      onTextChunk: onText && ((t) => t && onText(t)),
      customStopTriggers: stops.length ? stops : undefined,
      signal,
      stopOnAbortSignal: true,
    });
  } finally {
    busy = false;
    clearInterval(beating);
  }
  const answer = res.response;
  const out = {
    text: answer,
    length: res.metadata.stopReason === "maxTokens",
    stopped: res.metadata.stopReason === "stopGenerationTrigger",
    input: countTokens(history),
    output: model.tokenize(answer).length,
    seconds: (performance.now() - started) / 1000,
  };
  // one line per answer on stderr (the fixture's serve.log): what each request cost
  const { text: _, ...cost } = out;
  console.error(JSON.stringify({ ...cost, temperature: options.temperature, seed: options.seed, stop: res.metadata.stopReason }));
  return out;
}

// ---- HTTP ------------------------------------------------------------------------------
let counter = 0;
const rid = () => `${Date.now().toString(36)}${(counter++).toString(36)}`;
const sse = (event, data) => `${event ? `event: ${event}\n` : ""}data: ${JSON.stringify(data)}\n\n`;

function send(res, status, data) {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(data));
}

// an SSE comment line: clients skip it, idle watchdogs see bytes
const comment = (res) => () => res.write(": ping\n\n");

function startStream(res) {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
}

async function openaiChat(req, res, body, signal) {
  const id = `chatcmpl-${rid()}`;
  const created = Math.floor(Date.now() / 1000);
  const name = body.model || MODEL_ID;
  const options = sampling(req, body, body.max_completion_tokens ?? body.max_tokens ?? DEFAULT_MAX_TOKENS);
  const stops = body.stop == null ? [] : [body.stop].flat();
  const history = openaiHistory(body);
  const usage = (g) => ({ prompt_tokens: g.input, completion_tokens: g.output, total_tokens: g.input + g.output });
  if (!body.stream) {
    const g = await generate(history, options, stops, undefined, signal);
    return send(res, 200, {
      id, object: "chat.completion", created, model: name, system_fingerprint: null,
      choices: [{ index: 0, message: { role: "assistant", content: g.text, refusal: null }, logprobs: null, finish_reason: g.length ? "length" : "stop" }],
      usage: usage(g),
    });
  }
  const base = { id, object: "chat.completion.chunk", created, model: name, system_fingerprint: null };
  const chunk = (delta, finish = null) => sse(null, { ...base, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] });
  startStream(res);
  res.write(chunk({ role: "assistant", content: "" }));
  const g = await generate(history, options, stops, (t) => res.write(chunk({ content: t })), signal, comment(res));
  res.write(chunk({}, g.length ? "length" : "stop"));
  if (body.stream_options?.include_usage) res.write(sse(null, { ...base, choices: [], usage: usage(g) }));
  res.end("data: [DONE]\n\n");
}

const anthropicStop = (g) => (g.length ? "max_tokens" : g.stopped ? "stop_sequence" : "end_turn");

async function anthropicMessages(req, res, body, signal) {
  const id = `msg_${rid()}`;
  const name = body.model || MODEL_ID;
  const options = sampling(req, body, body.max_tokens ?? DEFAULT_MAX_TOKENS);
  const history = anthropicHistory(body);
  const stops = body.stop_sequences ?? [];
  const message = (content, stop, input, output) => ({
    id, type: "message", role: "assistant", model: name, content, stop_reason: stop, stop_sequence: null,
    usage: { input_tokens: input, output_tokens: output, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
  });
  if (!body.stream) {
    const g = await generate(history, options, stops, undefined, signal);
    return send(res, 200, message([{ type: "text", text: g.text }], anthropicStop(g), g.input, g.output));
  }
  startStream(res);
  res.write(sse("message_start", { type: "message_start", message: message([], null, countTokens(history), 1) }));
  res.write(sse("content_block_start", { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }));
  res.write(sse("ping", { type: "ping" }));
  const delta = (t) => sse("content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: t } });
  const ping = () => res.write(sse("ping", { type: "ping" }));
  const g = await generate(history, options, stops, (t) => res.write(delta(t)), signal, ping);
  res.write(sse("content_block_stop", { type: "content_block_stop", index: 0 }));
  res.write(sse("message_delta", {
    type: "message_delta",
    delta: { stop_reason: anthropicStop(g), stop_sequence: null },
    usage: { input_tokens: g.input, output_tokens: g.output },
  }));
  res.end(sse("message_stop", { type: "message_stop" }));
}

async function responses(req, res, body, signal) {
  const id = rid();
  const name = body.model || MODEL_ID;
  const options = sampling(req, body, body.max_output_tokens ?? DEFAULT_MAX_TOKENS);
  const history = responsesHistory(body);
  const item = (text, status) => ({
    type: "message", id: `msg_${id}`, status, role: "assistant",
    content: text === null ? [] : [{ type: "output_text", text, annotations: [] }],
  });
  const response = (status, output, g) => ({
    id: `resp_${id}`, object: "response", created_at: Math.floor(Date.now() / 1000), status, error: null,
    incomplete_details: status === "incomplete" ? { reason: "max_output_tokens" } : null,
    instructions: null, max_output_tokens: body.max_output_tokens ?? null, model: name, output,
    parallel_tool_calls: true, previous_response_id: null, reasoning: { effort: null, summary: null },
    store: false, temperature: options.temperature, text: { format: { type: "text" } }, tool_choice: "auto",
    tools: [], top_p: options.topP ?? 1.0, truncation: "disabled", user: null, metadata: {},
    usage: g ? {
      input_tokens: g.input, input_tokens_details: { cached_tokens: 0 }, output_tokens: g.output,
      output_tokens_details: { reasoning_tokens: 0 }, total_tokens: g.input + g.output,
    } : null,
  });
  const status = (g) => (g.length ? "incomplete" : "completed");
  if (!body.stream) {
    const g = await generate(history, options, [], undefined, signal);
    return send(res, 200, response(status(g), [item(g.text, status(g))], g));
  }
  let seq = 0;
  const ev = (type, data) => sse(type, { type, sequence_number: seq++, ...data });
  const at = { item_id: `msg_${id}`, output_index: 0 };
  const part = { type: "output_text", text: "", annotations: [] };
  startStream(res);
  res.write(ev("response.created", { response: response("in_progress", [], null) }));
  res.write(ev("response.in_progress", { response: response("in_progress", [], null) }));
  res.write(ev("response.output_item.added", { output_index: 0, item: item(null, "in_progress") }));
  res.write(ev("response.content_part.added", { ...at, content_index: 0, part }));
  const delta = (t) => res.write(ev("response.output_text.delta", { ...at, content_index: 0, delta: t, logprobs: [] }));
  const g = await generate(history, options, [], delta, signal, comment(res));
  res.write(ev("response.output_text.done", { ...at, content_index: 0, text: g.text, logprobs: [] }));
  res.write(ev("response.content_part.done", { ...at, content_index: 0, part: { ...part, text: g.text } }));
  res.write(ev("response.output_item.done", { output_index: 0, item: item(g.text, status(g)) }));
  const done = g.length ? "response.incomplete" : "response.completed";
  res.end(ev(done, { response: response(status(g), [item(g.text, status(g))], g) }));
}

function models(res) {
  const created = Math.floor(Date.now() / 1000);
  const entry = {
    id: MODEL_ID, object: "model", type: "model", display_name: MODEL_ID, owned_by: "local",
    created, created_at: new Date(created * 1000).toISOString(),
  };
  send(res, 200, { object: "list", data: [entry], has_more: false, first_id: MODEL_ID, last_id: MODEL_ID });
}

const ROUTES = {
  "/v1/chat/completions": openaiChat,
  "/chat/completions": openaiChat,
  "/v1/messages": anthropicMessages,
  "/v1/responses": responses,
  "/responses": responses,
};

const server = http.createServer(async (req, res) => {
  const path = new URL(req.url, "http://x").pathname;
  if (req.method === "GET" && (path === "/v1/models" || path === "/models")) return models(res);
  if (req.method === "GET" && path === "/health") return send(res, 200, { status: "ok", threads, context: contextSize, model: MODEL_ID });
  const pieces = [];
  for await (const piece of req) pieces.push(piece);
  const raw = Buffer.concat(pieces).toString("utf8"); // whole first: a character may span chunks
  let body;
  try {
    body = raw ? JSON.parse(raw) : {};
  } catch {
    return send(res, 400, { error: { type: "invalid_request_error", message: "body is not JSON" } });
  }
  if (req.method === "POST" && path === "/v1/messages/count_tokens") {
    return send(res, 200, { input_tokens: countTokens(anthropicHistory(body)) });
  }
  const route = req.method === "POST" ? ROUTES[path] : undefined;
  if (!route) return send(res, 404, { error: { type: "not_found_error", message: `no route ${req.method} ${path}` } });
  const abort = new AbortController();
  res.on("close", () => abort.abort());
  try {
    await serial(() => route(req, res, body, abort.signal));
  } catch (err) {
    if (abort.signal.aborted) return void console.error(`serve.mjs: ${req.method} ${path}: the client went away`);
    console.error(`serve.mjs: ${req.method} ${path}: ${err?.stack ?? err}`);
    if (!res.headersSent) send(res, 500, { error: { type: "api_error", message: String(err?.message ?? err) } });
    else res.end();
  }
});
server.listen(Number(opt.port), "127.0.0.1", () => {
  process.stdout.write(JSON.stringify({ port: server.address().port, threads, context: contextSize, model: MODEL_ID }) + "\n");
});
