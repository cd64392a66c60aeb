// Waking agents (SPEC section 8) through the official TypeScript SDK: a
// subscription to mailbox://inbox over stdio and over HTTP hears of mail that
// a different process sends, and of nothing sent to someone else;
// wait_for_mail returns such mail.
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import {
  connectStdio, lastLine, mailroomBin, runCli, serverEnv, startHttpServer, tempDir, transportsFromEnv,
} from '../lib/harness.mjs';
import { makeProfile } from '../lib/profiles.mjs';

const INBOX = 'mailbox://inbox';

// A client that counts notifications/resources/updated and lets a test wait
// for the next one.
async function subscriber(transport) {
  const client = new Client({ name: 'mailroom-interop-wake', version: '1.0.0' });
  const s = { client, count: 0, waiters: [] };
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
    assert.equal(n.params.uri, INBOX);
    s.count++;
    for (const w of s.waiters.splice(0)) w();
  });
  await client.connect(transport);
  s.next = (what) => new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`no notifications/resources/updated after ${what}`)), 10000);
    s.waiters.push(() => { clearTimeout(t); resolve(); });
  });
  s.inbox = async () => JSON.parse((await client.readResource({ uri: INBOX })).contents[0].text);
  return s;
}

for (const transport of transportsFromEnv()) {
  describe(`wake-up over ${transport}`, () => {
    let dir;
    let db;
    let server;
    let alice; // the sending process: a stdio server of its own
    const subs = {};
    before(async () => {
      dir = tempDir();
      db = path.join(dir, 'mailroom.db');
      for (const a of ['alice', 'bob', 'carol']) await runCli(['identity', 'add', '--db', db, a], { dir });
      if (transport === 'http') server = await startHttpServer({ dir, db });
      for (const a of ['bob', 'carol']) {
        let t;
        if (transport === 'http') {
          const token = lastLine((await runCli(['token', 'create', '--db', db, '--agent', a], { dir })).stdout);
          t = new StreamableHTTPClientTransport(new URL(server.url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } });
        } else {
          t = new StdioClientTransport({ command: mailroomBin(), args: ['serve', '--db', db, '--agent', a], env: serverEnv(dir), stderr: 'ignore' });
        }
        subs[a] = await subscriber(t);
      }
      alice = await connectStdio({ dir, db, agent: 'alice', profile: makeProfile('native') });
    });
    after(async () => {
      await alice?.close();
      for (const s of Object.values(subs)) await s.client.close().catch(() => {});
      await server?.stop();
      if (!process.env.INTEROP_KEEP_TMP) rmSync(dir, { recursive: true, force: true });
    });

    it('advertises a subscribable mailbox://inbox', async () => {
      assert.equal(subs.bob.client.getServerCapabilities().resources?.subscribe, true);
      const { resources } = await subs.bob.client.listResources();
      assert.deepEqual(resources.map((r) => r.uri), [INBOX]);
      const inbox = await subs.bob.inbox();
      assert.deepEqual(inbox, { unreadCount: 0, watermark: null, newest: [] });
    });

    it('notifies the recipient of mail from another process, and nobody else', async () => {
      await subs.bob.client.subscribeResource({ uri: INBOX });
      await subs.carol.client.subscribeResource({ uri: INBOX });
      // Mail to carol: carol hears of it; once she has, the server's check
      // of bob's inbox for that commit is done too.
      const carolHears = subs.carol.next('mail to carol');
      await alice.ok('add_message', { to: '@carol', subject: 'for carol', body: 'x' });
      await carolHears;
      const bobHears = subs.bob.next('mail to bob');
      const sent = await alice.ok('add_message', { to: '@bob', subject: 'for bob', body: 'y' });
      await bobHears;
      assert.equal(subs.bob.count, 1, 'bob was notified of mail that was not his');
      const inbox = await subs.bob.inbox();
      assert.equal(inbox.unreadCount, 1);
      assert.equal(inbox.watermark, sent.messageId);
      assert.equal(inbox.newest[0].messageId, sent.messageId);
      assert.equal(inbox.newest[0].from, '@alice');
    });

    it('wait_for_mail returns mail another process sends, without marking it read', async () => {
      // since: the watermark bob has seen, so mail sent at any moment after
      // it is new to the call, however the two race.
      const since = (await subs.bob.inbox()).watermark;
      const waiting = subs.bob.client.callTool({ name: 'wait_for_mail', arguments: { since, timeoutSeconds: 30 } });
      const sent = await alice.ok('add_message', { to: '@bob', subject: 'wake up', body: 'z', priority: 'high' });
      const res = await waiting;
      assert.equal(res.isError, undefined, JSON.stringify(res));
      const out = res.structuredContent;
      assert.equal(out.timedOut, false);
      assert.deepEqual(out.messages.map((m) => m.messageId), [sent.messageId]);
      assert.equal(out.messages[0].readAt, null);
      const timedOut = await subs.bob.client.callTool({ name: 'wait_for_mail', arguments: { timeoutSeconds: 1 } });
      assert.equal(timedOut.structuredContent.timedOut, true);
      assert.deepEqual(timedOut.structuredContent.messages, []);
    });
  });
}
