// A remote MCP server built on the official TypeScript SDK, for the tests
// of questions a server asks outside any call of its client's.
//
//     node ts_standalone_server.mjs [--get-delay MS] [--ask-timeout MS] [--stateless]
//
// It serves streamable HTTP with sessions on 127.0.0.1 (a free port) and
// prints `listening on URL` as its one line of stdout. Its tool `ask`
// asks the client's person a form question with `server.request` (not
// the call's own `sendRequest`): the SDK sends such a request on the
// session's standalone stream (the client's GET) only, and drops it when
// that stream is not open, so the question then times out
// (`--ask-timeout`, default 5000 ms). The tool answers `answered: JSON`
// with what the person gave, or `lost: REASON`.
//
// `--get-delay MS` holds each GET that long before the SDK opens the
// stream, as a slow link or a loaded server would: a client whose first
// call goes out before its GET is answered loses the question.
//
// `--stateless` serves without sessions, the SDK's stateless pattern: a
// new server and a `StreamableHTTPServerTransport` with
// `sessionIdGenerator: undefined` for each request, so no answer names a
// session (no `Mcp-Session-Id`). A GET there (held `--get-delay` too) gets
// what the SDK gives it, a stream nothing will ever write to; `ask` has no
// stream to ask on and is lost.
//
// Its tool `gap` answers `gap: MS`: how long after the latest
// `notifications/initialized` POST of its session (with `--stateless`: of
// the process, before the call) the session's first `tools/call` POST
// arrived, taken as each POST's body is read. A client that waits for its
// standalone stream after the handshake shows that wait there.

import http from "node:http";
import { randomUUID } from "node:crypto";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import {
  CallToolRequestSchema,
  ElicitResultSchema,
  ListToolsRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";

function option(name, fallback) {
  const at = process.argv.indexOf(name);
  if (at < 0) return fallback;
  const value = Number(process.argv[at + 1]);
  if (!Number.isFinite(value) || value < 0) {
    console.error(`${name} takes a number of milliseconds, not ${process.argv[at + 1]}`);
    process.exit(2);
  }
  return value;
}

const getDelay = option("--get-delay", 0);
const askTimeout = option("--ask-timeout", 5000);
const stateless = process.argv.includes("--stateless");

// Arrival times by session id ("" with --stateless): the latest
// `notifications/initialized`, and the gap to the first `tools/call`.
const arrivals = new Map();

function arrived(sessionId, message) {
  const key = stateless ? "" : (sessionId ?? "");
  const now = performance.now();
  const times = arrivals.get(key) ?? {};
  arrivals.set(key, times);
  for (const one of [message].flat()) {
    if (one?.method === "notifications/initialized") times.initialized = now;
    if (one?.method === "tools/call" && times.gap === undefined && times.initialized !== undefined) {
      times.gap = Math.round(now - times.initialized);
    }
  }
}

function newServer() {
  const server = new Server({ name: "standalone-asker", version: "1.0.0" }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [
      {
        name: "ask",
        description: "Ask the client's person for a name, outside this call's stream, and say what came back.",
        inputSchema: { type: "object", properties: {} },
      },
      {
        name: "gap",
        description: "How long after this session's initialized notification its first call arrived, in ms.",
        inputSchema: { type: "object", properties: {} },
      },
    ],
  }));
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    if (request.params.name === "gap") {
      const gap = arrivals.get(stateless ? "" : (extra.sessionId ?? ""))?.gap;
      return { content: [{ type: "text", text: `gap: ${gap ?? "unknown"}` }] };
    }
    if (request.params.name !== "ask") throw new Error(`no tool ${request.params.name}`);
    try {
      const answer = await server.request(
        {
          method: "elicitation/create",
          params: {
            message: "Which name?",
            requestedSchema: { type: "object", properties: { name: { type: "string" } } },
          },
        },
        ElicitResultSchema,
        { timeout: askTimeout },
      );
      return { content: [{ type: "text", text: `answered: ${JSON.stringify(answer)}` }] };
    } catch (error) {
      return { content: [{ type: "text", text: `lost: ${error.message}` }] };
    }
  });
  return server;
}

const sessions = new Map();

async function body(request) {
  const chunks = [];
  for await (const chunk of request) chunks.push(chunk);
  const text = Buffer.concat(chunks).toString("utf8");
  return text ? JSON.parse(text) : undefined;
}

// One request of the stateless mode, on a server and transport of its own.
async function statelessly(request, response, message) {
  if (request.method === "GET" && getDelay > 0) {
    await new Promise((resolve) => setTimeout(resolve, getDelay));
  }
  const server = newServer();
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
  response.on("close", () => {
    transport.close();
    server.close();
  });
  await server.connect(transport);
  await transport.handleRequest(request, response, message);
}

const listener = http.createServer(async (request, response) => {
  try {
    const id = request.headers["mcp-session-id"];
    const message = request.method === "POST" ? await body(request) : undefined;
    if (request.method === "POST") arrived(id, message);
    if (stateless) {
      await statelessly(request, response, message);
      return;
    }
    if (request.method === "POST") {
      let transport = id ? sessions.get(id) : undefined;
      if (!transport) {
        if (id || message?.method !== "initialize") {
          response.writeHead(404, { "Content-Type": "application/json" });
          response.end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32001, message: "Session not found" } }));
          return;
        }
        transport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (sessionId) => sessions.set(sessionId, transport),
        });
        transport.onclose = () => sessions.delete(transport.sessionId);
        await newServer().connect(transport);
      }
      await transport.handleRequest(request, response, message);
      return;
    }
    const transport = id ? sessions.get(id) : undefined;
    if (!transport) {
      response.writeHead(404).end("no such session");
      return;
    }
    if (request.method === "GET" && getDelay > 0) {
      await new Promise((resolve) => setTimeout(resolve, getDelay));
    }
    await transport.handleRequest(request, response);
  } catch (error) {
    if (!response.headersSent) response.writeHead(500).end(String(error));
  }
});

listener.listen(0, "127.0.0.1", () => {
  console.log(`listening on http://127.0.0.1:${listener.address().port}/mcp`);
});
