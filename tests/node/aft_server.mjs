// Starts a real aft-server on a free loopback port for the Node.js tests (server_openai_test.mjs,
// server_load.mjs) and stops it with SIGTERM.
import { spawn } from 'node:child_process';

// The server's stderr is kept (its tail) for failure messages and always read: a full pipe would
// block the server's logging, and with it the request that logs.
const kStderrKeep = 64 * 1024;

export async function startServer({ server, model, args = [], readyTimeoutMs = 60000 }) {
  if (!server || !model) throw new Error('startServer: the server and the model paths are needed');
  const child = spawn(server, [model, '--host', '127.0.0.1', '--port', '0', ...args], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (text) => {
    stderr += text;
    if (stderr.length > 2 * kStderrKeep) stderr = stderr.slice(-kStderrKeep);
  });
  const exited = new Promise((resolve) => {
    child.on('exit', (code, signal) => resolve({ code, signal }));
  });

  const url = await new Promise((resolve, reject) => {
    let settled = false;
    const fail = (why) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      clearInterval(poll);
      child.kill('SIGKILL');
      reject(new Error(`aft-server did not start: ${why}\n--- its stderr ---\n${stderr}`));
    };
    const timer = setTimeout(() => fail(`no "listening on" line within ${readyTimeoutMs} ms`),
                             readyTimeoutMs);
    // The line is printed once the model is loaded and warmed up (tools/aft_server.cpp).
    const poll = setInterval(() => {
      const match = /listening on (http:\/\/[0-9.]+:[0-9]+)/.exec(stderr);
      if (match && !settled) {
        settled = true;
        clearTimeout(timer);
        clearInterval(poll);
        resolve(match[1]);
      }
    }, 20);
    child.on('error', (error) => fail(error.message));
    exited.then(({ code, signal }) => fail(`it exited (code ${code}, signal ${signal})`));
  });

  return {
    url,
    child,
    stderr: () => stderr,
    // SIGTERM, then the exit status ({code, signal}); SIGKILL after timeoutMs.
    async stop(timeoutMs = 10000) {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      const status = await exited;
      clearTimeout(timer);
      return status;
    },
  };
}
