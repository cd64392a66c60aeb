// Transport-specific parts of the contract (SPEC section 1): identity binding
// over stdio and HTTP, bearer tokens, loopback development mode.
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import {
  connectHttp, connectStdio, freePort, lastLine, runCli, startHttpServer, tempDir, transportsFromEnv, worldDB,
} from '../lib/harness.mjs';
import { makeProfile } from '../lib/profiles.mjs';

const transports = transportsFromEnv();
const native = () => makeProfile('native');

function initializeRequest(url, headers = {}) {
  return fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...headers },
    body: JSON.stringify({
      jsonrpc: '2.0', id: 1, method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'mailroom-interop-raw', version: '1.0.0' } },
    }),
  });
}

async function whoAmI(agent) {
  const r = await agent.ok('add_message', { to: '@me', subject: 'whoami', body: 'identity probe' });
  const g = await agent.ok('get_message', { messageId: r.messageId });
  return g.from;
}

describe('stdio identity binding', { skip: !transports.includes('stdio') }, () => {
  let dir;
  let db;
  const open = [];
  before(async () => {
    dir = tempDir();
    db = worldDB(dir);
    await runCli(['identity', 'add', '--db', db, '--human', 'hank'], { dir });
  });
  after(async () => {
    for (const a of open) await a.close();
    if (!process.env.INTEROP_KEEP_TMP) rmSync(dir, { recursive: true, force: true });
  });

  it('--agent registers the agent on first use', async () => {
    const a = await connectStdio({ dir, db, agent: 'newcomer', profile: native() });
    open.push(a);
    assert.equal(await whoAmI(a), '@newcomer');
  });

  it('MAILROOM_AGENT binds the identity when --agent is absent', async () => {
    const a = await connectStdio({ dir, db, profile: native(), env: { MAILROOM_AGENT: 'envagent' } });
    open.push(a);
    assert.equal(await whoAmI(a), '@envagent');
  });

  it('without an identity every tool answers a clear error', async () => {
    let a;
    try {
      a = await connectStdio({ dir, db, profile: native() });
    } catch (e) {
      // Refusing to start is also a clear answer; make sure it says why.
      assert.match(e.message, /agent|identity/i);
      return;
    }
    open.push(a);
    for (const [tool, args] of [['list_messages', {}], ['add_message', { to: '@me', subject: 's', body: 'b' }], ['mark_read', { all: true }]]) {
      await a.fails(tool, args, /agent|identity/i);
    }
  });

  it("a human's name is refused as a stdio agent", async () => {
    let a;
    try {
      a = await connectStdio({ dir, db, agent: 'hank', profile: native() });
    } catch (e) {
      assert.match(e.message, /human|hank/i);
      return;
    }
    open.push(a);
    await a.fails('list_messages', {}, /human|hank/i);
  });

  it('a broadcast that reaches nobody is an error', async () => {
    const soloDir = tempDir();
    const solo = await connectStdio({ dir: soloDir, db: worldDB(soloDir, 'solo'), agent: 'solo', profile: native() });
    try {
      await solo.fails('add_message', { to: '*', subject: 's', body: 'b' }, 'No recipients: the broadcast reaches nobody');
      assert.equal((await solo.ok('list_messages', { box: 'outbox' })).totalCount, 0);
    } finally {
      await solo.close();
      rmSync(soloDir, { recursive: true, force: true });
    }
  });

  it(':memory: receipts say durable:false', async () => {
    const a = await connectStdio({ dir, db: ':memory:', agent: 'ephemeral', profile: native() });
    open.push(a);
    const s = await a.ok('add_message', { to: '@me', subject: 'gone soon', body: 'b' });
    assert.equal(s.durable, false);
    const r = await a.ok('mark_read', { all: true });
    assert.equal(r.readCount, 1);
    assert.equal(r.durableCount, 0);
  });

  it(':memory: lifecycle tools work and say durable:false', async () => {
    const a = await connectStdio({ dir, db: ':memory:', agent: 'ephemeral2', profile: native() });
    open.push(a);
    const id = (await a.ok('add_message', { to: '@me', subject: 'to myself', body: 'b', priority: 'high' })).messageId;
    let st = await a.ok('mailbox_status', {});
    assert.deepEqual([st.unread.total, st.unread.direct, st.unread.byPriority.high], [1, 1, 1]);
    await a.ok('mark_read', { messageId: id });
    const u = await a.ok('mark_unread', { messageId: id });
    assert.deepEqual([u.status, u.readAt, u.durable], ['unread', null, false]);
    await a.ok('archive_message', { messageId: id });
    assert.equal((await a.ok('mailbox_status', {})).archived, 1);
    const ua = await a.ok('unarchive_message', { messageId: id });
    assert.deepEqual([ua.status, ua.archivedAt, ua.durable], ['unarchived', null, false]);
    const rt = await a.ok('retract_message', { messageId: id });
    assert.deepEqual([rt.status, rt.durable], ['retracted', false]);
    assert.equal((await a.ok('get_message', { messageId: id })).subject, '');
    const d = await a.ok('delete_message', { messageId: id });
    assert.deepEqual([d.status, d.durable], ['deleted', false]);
    await a.fails('get_message', { messageId: id }, `Message not found: ${id}`);
    await a.fails('retract_message', { messageId: id }, `Message not found: ${id}`);
    st = await a.ok('mailbox_status', {});
    assert.deepEqual([st.unread.total, st.archived], [0, 0]);
    await a.fails('list_messages', { of: '@nobody' }, 'No read grant for @nobody');
  });
});

describe('many stdio processes on one database', { skip: !transports.includes('stdio') }, () => {
  const NAMES = ['w1', 'w2', 'w3', 'w4'];
  const PER = 15;
  let dir;
  let db;
  let agents = [];
  before(async () => {
    dir = tempDir();
    db = worldDB(dir);
    for (const n of NAMES) await runCli(['identity', 'add', '--db', db, n], { dir });
    agents = await Promise.all(NAMES.map((n) => connectStdio({ dir, db, agent: n, profile: native() })));
  });
  after(async () => {
    for (const a of agents) await a.close();
    if (!process.env.INTEROP_KEEP_TMP) rmSync(dir, { recursive: true, force: true });
  });

  it('concurrent sends and drains from four processes: no error reaches a caller', async () => {
    // every process sends PER messages to the next agent and PER broadcasts, all at once
    await Promise.all(agents.map((a, i) => (async () => {
      const next = NAMES[(i + 1) % NAMES.length];
      const sends = [];
      for (let k = 0; k < PER; k++) {
        sends.push(a.ok('add_message', { to: `@${next}`, subject: `direct ${k}`, body: `from ${a.name}` }));
        sends.push(a.ok('add_message', { to: '*', subject: `broadcast ${k}`, body: `from ${a.name}` }));
      }
      await Promise.all(sends);
    })()));
    const expected = PER + PER * (NAMES.length - 1);
    for (const a of agents) {
      const l = await a.ok('list_messages', { unreadOnly: true, limit: 200 });
      assert.equal(l.totalCount, expected, `${a.name} sees ${l.totalCount} unread, expected ${expected}`);
    }
    const drains = await Promise.all(agents.map((a) => a.ok('mark_read', { all: true })));
    for (const d of drains) {
      assert.equal(d.readCount, expected, JSON.stringify(d));
      assert.equal(d.durableCount, expected, JSON.stringify(d));
      assert.equal(d.failureCount, 0, JSON.stringify(d));
    }
  });

  it('read state survives the process that wrote it', async () => {
    const first = agents[0];
    const sent = await agents[1].ok('add_message', { to: `@${first.name}`, subject: 'restart', body: 'b' });
    const r = await first.ok('mark_read', { messageId: sent.messageId });
    await first.close();
    agents[0] = await connectStdio({ dir, db, agent: first.name, profile: native() });
    const g = await agents[0].ok('get_message', { messageId: sent.messageId });
    assert.equal(g.readAt, r.readAt);
    assert.equal((await agents[0].ok('list_messages', { unreadOnly: true })).totalCount, 0);
  });
});

describe('HTTP bearer tokens and loopback development mode', { skip: !transports.includes('http') }, () => {
  let dir;
  let db;
  const tokens = {};
  const servers = [];
  const clients = [];
  before(async () => {
    dir = tempDir();
    db = worldDB(dir);
    for (const a of ['alice', 'bob']) tokens[a] = lastLine((await runCli(['token', 'create', '--db', db, '--agent', a], { dir })).stdout);
  });
  after(async () => {
    for (const c of clients) await c.close();
    for (const s of servers) await s.stop();
    if (!process.env.INTEROP_KEEP_TMP) rmSync(dir, { recursive: true, force: true });
  });

  it('token create prints a fresh random token as its last line', async () => {
    const again = lastLine((await runCli(['token', 'create', '--db', db, '--agent', 'alice'], { dir })).stdout);
    for (const t of [tokens.alice, tokens.bob, again]) {
      assert.ok(t.length >= 22 && !/\s/.test(t), `token looks wrong: ${JSON.stringify(t)}`);
    }
    assert.equal(new Set([tokens.alice, tokens.bob, again]).size, 3);
  });

  it('a missing or bad token is HTTP 401, and MAILROOM_AGENT never applies', async () => {
    const s = await startHttpServer({ dir, db, env: { MAILROOM_AGENT: 'alice' } });
    servers.push(s);
    assert.equal((await initializeRequest(s.url)).status, 401);
    assert.equal((await initializeRequest(s.url, { Authorization: 'Bearer not-a-token' })).status, 401);
    const bob = await connectHttp({ url: s.url, token: tokens.bob, name: 'bob', profile: native() });
    clients.push(bob);
    assert.equal(await whoAmI(bob), '@bob');
  });

  it('loopback development mode binds token-less requests to --agent', async () => {
    const s = await startHttpServer({ dir, db, extraArgs: ['--agent', 'devagent'] });
    servers.push(s);
    const anon = await connectHttp({ url: s.url, name: 'devagent', profile: native() });
    clients.push(anon);
    assert.equal(await whoAmI(anon), '@devagent');
    assert.equal((await initializeRequest(s.url, { Authorization: 'Bearer not-a-token' })).status, 401, 'a bad token is still 401');
    const alice = await connectHttp({ url: s.url, token: tokens.alice, name: 'alice', profile: native() });
    clients.push(alice);
    assert.equal(await whoAmI(alice), '@alice', 'a good token wins over --agent');
  });

  it('--agent with a non-loopback --http address is refused at start', async () => {
    const port = await freePort();
    const r = await runCli(['serve', '--db', db, '--http', `0.0.0.0:${port}`, '--agent', 'devagent'], { dir, allowFailure: true, timeoutMs: 10000 });
    assert.equal(r.signal, null, 'the server started (it had to be killed) instead of refusing');
    assert.notEqual(r.code, 0);
    assert.match(r.stderr + r.stdout, /loopback|--agent/i);
  });
});
