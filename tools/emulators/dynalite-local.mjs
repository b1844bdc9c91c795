// Starts dynalite (DynamoDB emulator) on 127.0.0.1, and keeps it running
// when a client goes away in the middle of a request.
//
// dynalite's own command line dies then: its request handler does
// req.on('error', err => { throw err }), and Node emits 'error' ("aborted",
// ECONNRESET) on a request whose connection closes before its body has
// arrived, which is what a process killed mid-request leaves behind. Here
// such an error ends that one connection only. Errors from dynalite's store
// are left alone: they still end the process, loudly, because the
// emulator's state can no longer be trusted.
//
// Usage: node dynalite-local.mjs --port PORT [--host 127.0.0.1]
//   [--createTableMs MS] [--deleteTableMs MS] [--updateTableMs MS]
//   [--maxItemSizeKb KB] [--path DIR] [--verbose] [--debug]
// The flags are dynalite's own (dynalite --help); unknown flags are refused.
import dynalite from "dynalite";
import { parseArgs } from "node:util";

const { values: flags } = parseArgs({
  options: {
    host: { type: "string", default: "127.0.0.1" },
    port: { type: "string", default: "4567" },
    path: { type: "string" },
    createTableMs: { type: "string" },
    deleteTableMs: { type: "string" },
    updateTableMs: { type: "string" },
    maxItemSizeKb: { type: "string" },
    verbose: { type: "boolean", short: "v", default: false },
    debug: { type: "boolean", short: "d", default: false },
  },
});

function number(name) {
  const text = flags[name];
  if (text === undefined) return undefined;
  const n = Number(text);
  if (text.trim() === "" || !Number.isFinite(n) || n < 0) {
    console.error(`dynalite-local: --${name} wants a number, got ${JSON.stringify(text)}`);
    process.exit(2);
  }
  return n;
}

const port = number("port");
const server = dynalite({
  path: flags.path,
  createTableMs: number("createTableMs"),
  deleteTableMs: number("deleteTableMs"),
  updateTableMs: number("updateTableMs"),
  maxItemSizeKb: number("maxItemSizeKb"),
  verbose: flags.verbose,
  debug: flags.debug,
});

// dynalite registers one 'request' listener; it is wrapped, not replaced.
const handlers = server.listeners("request");
if (handlers.length !== 1) {
  throw new Error(`dynalite-local: expected dynalite's server to have 1 request listener, found ${handlers.length}`);
}
const [handleRequest] = handlers;
server.removeListener("request", handleRequest);
server.on("request", (req, res) => {
  const before = new Set(req.listeners("error"));
  handleRequest(req, res);
  // Take away the throwing 'error' listener dynalite just added.
  for (const listener of req.listeners("error")) {
    if (!before.has(listener)) req.removeListener("error", listener);
  }
  req.on("error", (err) => dropConnection("request", req.socket, err));
  res.on("error", (err) => dropConnection("response", req.socket, err));
});

// Codes that say only that the client went away: a reset, a write to a
// closed connection, or (from the HTTP parser) the client's end of the
// connection closing before the body it announced.
const clientGone = new Set(["ECONNRESET", "EPIPE", "HPE_INVALID_EOF_STATE"]);

// An error on a connection outside a request's streams: a reset before the
// request was read, a malformed request, a client closing mid-body.
server.on("clientError", (err, socket) => dropConnection("connection", socket, err));

// A client went away mid-request, or its connection broke. Nothing of
// dynalite's state is involved: its handler acts only once the whole body
// has arrived. Anything but a client going away is logged.
function dropConnection(where, socket, err) {
  if (!clientGone.has(err.code)) {
    console.error(`dynalite-local: ${where} error, closing that connection: ${err.stack ?? err}`);
  } else if (flags.verbose) {
    console.error(`dynalite-local: client went away mid-request (${where}: ${err.code})`);
  }
  socket?.destroy();
}

server.listen(port, flags.host, () => {
  const address = server.address();
  console.log(`dynalite listening at http://${address.address}:${address.port}`);
});
for (const signal of ["SIGTERM", "SIGINT"]) {
  process.on(signal, () => {
    server.close((err) => process.exit(err ? 1 : 0));
    server.closeAllConnections();
  });
}
