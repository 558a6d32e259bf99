// A remote MCP server built on the official TypeScript SDK, for the tests
// of questions a server asks outside any call of its client's.
//
//     node ts_standalone_server.mjs [--get-delay MS] [--ask-timeout MS]
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

function newServer() {
  const server = new Server({ name: "standalone-asker", version: "1.0.0" }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [
      {
        name: "ask",
        description: "Ask the client's person for a name, outside this call's stream, and say what came back.",
        inputSchema: { type: "object", properties: {} },
      },
    ],
  }));
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
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

const listener = http.createServer(async (request, response) => {
  try {
    const id = request.headers["mcp-session-id"];
    if (request.method === "POST") {
      const message = await body(request);
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
