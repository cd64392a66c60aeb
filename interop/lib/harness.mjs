// Test harness for the mailroom interop suite: spawns real `mailroom` processes
// (stdio servers, one per identity, or one streamable-HTTP server with a bearer
// token per identity) on a throwaway database and talks to them with the
// official TypeScript MCP SDK client.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { makeProfile } from './profiles.mjs';

export function mailroomBin() {
  const bin = process.env.MAILROOM_BIN;
  if (!bin) {
    throw new Error('MAILROOM_BIN is not set: build the server (go build -o DIR/mailroom ./cmd/mailroom) and export MAILROOM_BIN=DIR/mailroom (scripts/interop.sh does this)');
  }
  return bin;
}

// The environment every mailroom process gets: the caller's, without any
// identity or database the developer may have exported, and with a private
// XDG_DATA_HOME so nothing can ever touch a real default mailbox.
export function serverEnv(dir, extra = {}) {
  const env = { ...process.env, XDG_DATA_HOME: path.join(dir, 'xdg') };
  delete env.MAILROOM_AGENT;
  delete env.MAILROOM_DB;
  Object.assign(env, extra);
  for (const [k, v] of Object.entries(extra)) {
    if (v === undefined) delete env[k];
  }
  return env;
}

// worldDB is the database one world (or test) uses: a file in dir, or, when
// MAILROOM_TEST_POSTGRES names a PostgreSQL server (scripts/interop.sh
// --postgres), a fresh schema there, so the same suite runs on both stores.
export function worldDB(dir, name = 'mailroom') {
  const base = process.env.MAILROOM_TEST_POSTGRES;
  if (!base) return path.join(dir, `${name}.db`);
  const u = new URL(base);
  u.searchParams.set('search_path', `i_${randomBytes(6).toString('hex')}`);
  return u.toString();
}

export function tempDir(prefix = 'mailroom-interop-') {
  return mkdtempSync(path.join(os.tmpdir(), prefix));
}

// Runs a mailroom CLI command to completion; rejects on a non-zero exit unless
// allowFailure is set.
export function runCli(args, { dir, env = {}, allowFailure = false, timeoutMs = 30000 } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(mailroomBin(), args, {
      env: serverEnv(dir ?? os.tmpdir(), env),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const res = { code, signal, stdout, stderr };
      if (!allowFailure && code !== 0) {
        reject(new Error(`mailroom ${args.join(' ')} exited ${code ?? signal}\nstdout: ${stdout}\nstderr: ${stderr}`));
      } else {
        resolve(res);
      }
    });
  });
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

function canConnect(port) {
  return new Promise((resolve) => {
    const sock = net.connect({ host: '127.0.0.1', port });
    sock.once('connect', () => {
      sock.destroy();
      resolve(true);
    });
    sock.once('error', () => resolve(false));
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Starts `mailroom serve --http 127.0.0.1:PORT ...` and waits until it accepts
// connections. Returns {url, port, proc, stderr(), stop()}.
export async function startHttpServer({ dir, db, extraArgs = [], env = {} }) {
  let lastErr = '';
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    const args = ['serve', '--db', db, '--http', `127.0.0.1:${port}`, ...extraArgs];
    const proc = spawn(mailroomBin(), args, { env: serverEnv(dir, env), stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    proc.stderr.on('data', (d) => (stderr += d));
    let exited = null;
    proc.on('exit', (code, signal) => (exited = { code, signal }));
    const deadline = Date.now() + 15000;
    while (Date.now() < deadline && !exited) {
      if (await canConnect(port)) {
        const stop = () => stopProcess(proc);
        return { url: `http://127.0.0.1:${port}/mcp`, port, proc, stderr: () => stderr, stop };
      }
      await sleep(50);
    }
    proc.kill('SIGKILL');
    lastErr = `mailroom ${args.join(' ')} did not start listening (exit: ${JSON.stringify(exited)})\nstderr: ${stderr}`;
  }
  throw new Error(lastErr);
}

export function stopProcess(proc) {
  return new Promise((resolve) => {
    if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
    const timer = setTimeout(() => proc.kill('SIGKILL'), 3000);
    proc.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    proc.kill('SIGTERM');
  });
}

// ---------------------------------------------------------------------------
// Tool results

// Normalises a CallToolResult and checks the parts of the contract that hold
// for every call (SPEC section 5): results carry structuredContent and the same
// JSON as text; errors are isError results with a one-line text message.
const NOTICE_TOOLS = new Set(['get_message', 'list_messages', 'wait_for_mail']);

export function normalize(tool, res) {
  const texts = (res.content ?? []).filter((c) => c.type === 'text').map((c) => c.text);
  const text = texts.join('\n');
  if (res.isError) {
    assert.ok(text.length > 0, `${tool}: error result without a text message: ${JSON.stringify(res)}`);
    assert.ok(!text.trim().includes('\n'), `${tool}: error message is not one line: ${JSON.stringify(text)}`);
    return { isError: true, text: text.trim(), data: res.structuredContent, raw: res };
  }
  assert.ok(res.structuredContent && typeof res.structuredContent === 'object',
    `${tool}: success result without structuredContent: ${JSON.stringify(res)}`);
  // Tools that show others' text end with the trust notice (SPEC 11): one
  // more short text block after the JSON.
  const notice = NOTICE_TOOLS.has(tool);
  assert.equal(texts.length, notice ? 2 : 1, `${tool}: expected ${notice ? 2 : 1} text content blocks, got ${texts.length}`);
  if (notice) {
    const n = texts[1];
    assert.ok(n.length > 0 && n.length <= 200 && /instructions/.test(n) && !n.trim().startsWith('{'),
      `${tool}: last block is not the trust notice: ${JSON.stringify(n)}`);
  }
  let parsed;
  assert.doesNotThrow(() => (parsed = JSON.parse(texts[0])), `${tool}: text content is not JSON: ${texts[0]}`);
  assert.deepEqual(parsed, res.structuredContent, `${tool}: text content differs from structuredContent`);
  return { isError: false, text: texts[0], data: res.structuredContent, raw: res };
}

// ---------------------------------------------------------------------------
// Clients

export class Agent {
  constructor(name, client, transport, profile, stderrBuf) {
    this.name = name;
    this.client = client;
    this.transport = transport;
    this.profile = profile;
    this.stderrBuf = stderrBuf;
    this.tools = null;
  }

  async listTools() {
    const { tools } = await this.client.listTools();
    this.tools = Object.fromEntries(tools.map((t) => [t.name, t]));
    return tools;
  }

  // Sends a tools/call the way this agent's client profile would and returns
  // the normalised result.
  async call(tool, args) {
    if (!this.tools) await this.listTools();
    const sent = this.profile.transform(tool, args, this.tools[tool]?.inputSchema);
    const res = await this.client.callTool({ name: tool, arguments: sent });
    return { ...normalize(tool, res), sent };
  }

  // Sends exactly these arguments, bypassing the profile.
  async callRaw(tool, args) {
    if (!this.tools) await this.listTools();
    const res = await this.client.callTool({ name: tool, arguments: args });
    return normalize(tool, res);
  }

  // Calls a tool that must succeed; returns structuredContent.
  async ok(tool, args) {
    const r = await this.call(tool, args);
    assert.equal(r.isError, false, `${this.name}: ${tool}(${JSON.stringify(r.sent)}) failed: ${r.text}`);
    return r.data;
  }

  // Calls a tool that must fail; returns the error text, checked against
  // `expected` (a string for an exact match or a RegExp).
  async fails(tool, args, expected) {
    const r = await this.call(tool, args);
    const shown = `${this.name}: ${tool}(${JSON.stringify(r.sent)})`;
    assert.equal(r.isError, true, `${shown} succeeded but must fail: ${r.text}`);
    if (typeof expected === 'string') assert.equal(r.text, expected, shown);
    else if (expected) assert.match(r.text, expected, shown);
    return r.text;
  }

  async close() {
    try {
      await this.client.close();
    } catch {
      /* already gone */
    }
  }
}

async function connectClient(name, transport, profile, stderrBuf) {
  const client = new Client({ name: `mailroom-interop-${profile.name}`, version: '1.0.0' });
  await client.connect(transport);
  const agent = new Agent(name, client, transport, profile, stderrBuf);
  await agent.listTools();
  return agent;
}

export async function connectStdio({ dir, db, agent, profile, env = {}, args = [] }) {
  const stderrBuf = { text: '' };
  const transport = new StdioClientTransport({
    command: mailroomBin(),
    args: ['serve', '--db', db, ...(agent ? ['--agent', agent] : []), ...args],
    env: serverEnv(dir, env),
    stderr: 'pipe',
  });
  transport.stderr?.on('data', (d) => (stderrBuf.text += d));
  try {
    return await connectClient(agent ?? env.MAILROOM_AGENT ?? '(none)', transport, profile, stderrBuf);
  } catch (e) {
    e.message += `\nserver stderr: ${stderrBuf.text}`;
    await transport.close().catch(() => {});
    throw e;
  }
}

export async function connectHttp({ url, token, name, profile }) {
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  return connectClient(name, transport, profile, { text: '' });
}

// ---------------------------------------------------------------------------
// A world: one database shared by several identities over one transport.

export const AGENTS = ['alice', 'bob', 'carol', 'mallory'];
export const HUMAN = 'hank';
export const ROLE = 'reviewer';
export const ROLE_HOLDERS = ['bob', 'carol'];

export async function createWorld({ transport, profileName, env = {} }) {
  const dir = tempDir();
  const db = worldDB(dir);
  const profile = makeProfile(profileName);
  const world = { transport, profile, dir, db, agents: {}, tokens: {}, server: null, env };
  const cli = (args) => runCli(args, { dir, env });
  try {
    // Every identity exists before the first send, so a broadcast reaches all.
    for (const a of AGENTS) await cli(['identity', 'add', '--db', db, a]);
    await cli(['identity', 'add', '--db', db, '--human', HUMAN]);
    for (const a of ROLE_HOLDERS) await cli(['role', 'grant', '--db', db, a, ROLE]);

    if (transport === 'stdio') {
      for (const a of AGENTS) {
        world.agents[a] = await connectStdio({ dir, db, agent: a, profile, env });
      }
    } else if (transport === 'http') {
      for (const a of AGENTS) world.tokens[a] = lastLine((await cli(['token', 'create', '--db', db, '--agent', a])).stdout);
      world.tokens[HUMAN] = lastLine((await cli(['token', 'create', '--db', db, '--human', HUMAN])).stdout);
      world.server = await startHttpServer({ dir, db, env });
      for (const a of [...AGENTS, HUMAN]) {
        world.agents[a] = await connectHttp({ url: world.server.url, token: world.tokens[a], name: a, profile });
      }
    } else {
      throw new Error(`unknown transport ${transport}`);
    }
  } catch (e) {
    await closeWorld(world);
    throw e;
  }
  return world;
}

export async function closeWorld(world) {
  for (const a of Object.values(world.agents)) await a.close();
  if (world.server) await world.server.stop();
  if (!process.env.INTEROP_KEEP_TMP) rmSync(world.dir, { recursive: true, force: true });
}

export function lastLine(text) {
  const lines = text.split('\n').map((l) => l.trim()).filter(Boolean);
  assert.ok(lines.length > 0, 'command printed nothing on stdout');
  return lines[lines.length - 1];
}

export function transportsFromEnv() {
  return (process.env.INTEROP_TRANSPORTS || 'stdio,http').split(',').map((s) => s.trim()).filter(Boolean);
}

export function profilesFromEnv() {
  return (process.env.INTEROP_PROFILES || 'native,stringified').split(',').map((s) => s.trim()).filter(Boolean);
}
