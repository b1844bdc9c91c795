// Starts fauxqs (SQS emulator) on 127.0.0.1 only: its own command line
// binds every interface. Usage: node fauxqs-local.mjs PORT
import { buildApp } from "fauxqs";

const port = Number(process.argv[2] ?? 0);
const app = buildApp({ logger: false, host: `127.0.0.1:${port}` });
const address = await app.listen({ port, host: "127.0.0.1" });
console.log(`fauxqs listening at ${address}`);
for (const signal of ["SIGTERM", "SIGINT"]) {
  process.on(signal, () => app.close().finally(() => process.exit(0)));
}
