// The web inbox as a person uses it, in Debian's Chromium driven by
// Playwright: sign in with a human's token, watch an agent's message arrive
// without a reload, open its thread, reply as human:dana (and see the agent
// receive the reply over MCP), archive, mark all read, and a cross-site form
// post refused. The agent side is `mailroom send/inbox/read --url`, the
// go-sdk MCP client over streamable HTTP with the agent's bearer token.
//
// Needs MAILROOM_BIN (a built mailroom) and Chromium at CHROMIUM
// (default /usr/bin/chromium). Leaves a screenshot in artifacts/.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, mkdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import http from "node:http";
import { chromium } from "playwright-core";

const here = dirname(fileURLToPath(import.meta.url));
const bin = process.env.MAILROOM_BIN;
const artifacts = join(here, "artifacts");
assert.ok(bin, "set MAILROOM_BIN to a built mailroom binary");

const dir = mkdtempSync(join(tmpdir(), "mailroom-web-"));
const env = { ...process.env, MAILROOM_DB: join(dir, "m.db"), HOME: dir, XDG_DATA_HOME: join(dir, "data") };
delete env.MAILROOM_AGENT;
delete env.MAILROOM_URL;
delete env.MAILROOM_TOKEN;

function cli(args, extraEnv = {}) {
  return execFileSync(bin, args, { env: { ...env, ...extraEnv }, encoding: "utf8", timeout: 30000 });
}
const lastLine = (s) => s.trim().split("\n").pop().trim();

let server, base, browser, attacker, danaToken, aliceToken;
const asAlice = (args) => cli([...args, "--url", base], { MAILROOM_TOKEN: aliceToken });

before(async () => {
  danaToken = lastLine(cli(["token", "create", "--human", "dana"]));
  aliceToken = lastLine(cli(["token", "create", "--agent", "alice"]));
  cli(["identity", "add", "bob"]);
  cli(["role", "grant", "dana", "ops"]);
  server = spawn(bin, ["serve", "--http", "127.0.0.1:0"], { env, stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  server.stderr.on("data", (d) => { stderr += d; });
  base = await new Promise((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => reject(new Error("serve printed no address; stderr: " + stderr)), 30000);
    server.stdout.on("data", (d) => {
      out += d;
      const m = /serving MCP at (http:\/\/\S+)\/mcp/.exec(out);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
    server.on("exit", (code) => reject(new Error(`serve exited ${code}; stderr: ${stderr}`)));
  });
  // A page on another origin that posts a form to the inbox, as a
  // cross-site request forgery would.
  attacker = http.createServer((req, res) => {
    res.setHeader("Content-Type", "text/html");
    res.end(`<!doctype html><form id="f" method="post" action="${base}/send">
      <input name="to" value="@alice"><input name="subject" value="forged"><input name="body" value="x">
      <input name="csrf" value="guess"></form><script>document.getElementById("f").submit()</script>`);
  });
  await new Promise((r) => attacker.listen(0, "127.0.0.1", r));
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
      "--disable-component-update", "--disable-sync", "--no-first-run"],
  });
});

after(async () => {
  await browser?.close();
  attacker?.close();
  if (server && server.exitCode === null) {
    server.kill("SIGINT");
    await new Promise((r) => server.once("exit", r));
  }
  rmSync(dir, { recursive: true, force: true });
});

test("a human reads and answers agents' mail in the web inbox", async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  page.setDefaultTimeout(15000);
  const failShot = async () => {
    mkdirSync(artifacts, { recursive: true });
    await page.screenshot({ path: join(artifacts, "failure.png"), fullPage: true }).catch(() => {});
    console.error("page at failure: " + page.url() + "\n" + (await page.locator("body").innerText().catch(() => "")).slice(0, 3000));
  };
  try { // on failure, keep what the page showed
    await run(page, context);
  } catch (e) {
    await failShot();
    throw e;
  }
});

// live waits until the page's event stream is connected, so mail sent from
// now on must reach it.
const live = (page) => page.waitForFunction(() => document.body.dataset.live === "connected");

async function run(page, context) {
  const dialogs = [];
  page.on("dialog", (d) => { dialogs.push(d.message()); d.dismiss(); });

  // Sign in: a bad token is refused, dana's is taken into a cookie session.
  await page.goto(base + "/");
  await page.getByLabel("Token").fill("mr_not-a-token");
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByText("That token is not valid.").waitFor();
  await page.getByLabel("Token").fill(aliceToken);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByText(/belongs to an agent/).waitFor();
  await page.getByLabel("Token").fill(danaToken);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { level: 1, name: "Inbox" }).waitFor();
  await page.getByText("Signed in as human:dana").waitFor();
  const [cookie] = (await context.cookies()).filter((c) => c.name === "mailroom_session");
  assert.ok(cookie, "no session cookie");
  assert.equal(cookie.httpOnly, true);
  assert.equal(cookie.sameSite, "Strict");
  assert.ok(!cookie.value.includes(danaToken.slice(3, 20)), "the cookie carries the token");
  assert.equal(await page.locator("#unread-count").textContent(), "0");

  // The live stream is open; mark the document so a reload would show.
  await live(page);
  await page.evaluate(() => { window.__sameDocument = true; });

  // An agent sends over MCP; the row appears without a reload, its text escaped.
  const sent = asAlice(["send", "--to", "human:dana", "--subject", "Deploy <b>now</b>?", "--priority", "high",
    "--body", "<script>alert('owned')</script>\nThe build is green."]);
  const first = /MESSAGE:\S+/.exec(sent)[0];
  const row = page.locator(`tr[data-id="${first}"]`);
  await row.waitFor({ timeout: 10000 });
  assert.equal(await page.evaluate(() => window.__sameDocument), true, "the page reloaded");
  assert.equal(await row.getByRole("link").textContent(), "Deploy <b>now</b>?");
  assert.equal(await row.locator("b").count(), 0, "the subject was rendered as HTML");
  await page.locator("#unread-count", { hasText: "1" }).waitFor();

  // Mail to a role dana holds, and a broadcast she is not part of (humans
  // are excluded), arrive the same way.
  asAlice(["send", "--to", "role:ops", "--subject", "Disk at 91%", "--body", "on db-2"]);
  await page.getByRole("link", { name: "Disk at 91%" }).waitFor({ timeout: 10000 });

  // Open the thread: the body is shown as text, no script runs.
  await row.getByRole("link").click();
  await page.getByRole("heading", { level: 2, name: "Deploy <b>now</b>?" }).waitFor();
  assert.match(await page.locator("pre.body").first().textContent(), /<script>alert\('owned'\)<\/script>/);
  assert.deepEqual(dialogs, []);

  // Reply as human:dana; the agent receives it through MCP in the thread.
  assert.equal(await page.getByLabel("To", { exact: true }).inputValue(), "@alice");
  await page.getByLabel("Message", { exact: true }).fill("Ship it. <i>carefully</i>");
  await page.getByRole("button", { name: "Send reply" }).click();
  await page.getByText("Sent to 1 recipient.").waitFor();
  const inbox = JSON.parse(asAlice(["inbox", "--unread", "--json"]));
  const reply = inbox.messages.find((m) => m.from === "human:dana");
  assert.ok(reply, "alice did not receive dana's reply: " + JSON.stringify(inbox));
  assert.equal(reply.subject, "Re: Deploy <b>now</b>?");
  const full = JSON.parse(asAlice(["read", reply.messageId, "--json"]));
  assert.equal(full.inReplyTo, first);
  assert.equal(full.body, "Ship it. <i>carefully</i>");
  assert.equal(full.threadId, JSON.parse(asAlice(["read", first, "--json"])).threadId);

  // Back in the inbox: new mail, then archive one and mark all read.
  await page.getByRole("link", { name: "← Inbox" }).click();
  await page.getByRole("heading", { level: 1, name: "Inbox" }).waitFor();
  await live(page);
  asAlice(["send", "--to", "human:dana", "--subject", "Lunch?", "--body", "noon"]);
  await page.getByRole("link", { name: "Lunch?" }).waitFor({ timeout: 10000 });
  await page.getByRole("button", { name: "Archive: Lunch?" }).click();
  await page.getByText("Archived.").waitFor();
  assert.equal(await page.getByRole("link", { name: "Lunch?" }).count(), 0);
  await page.getByLabel("role queues too").check();
  await page.getByRole("button", { name: "Mark all read" }).click();
  await page.getByText(/^Marked 2 messages read\./).waitFor();
  assert.equal(await page.locator("#unread-count").textContent(), "0");
  assert.equal(await page.locator("tr.unread").count(), 0);
  const status = JSON.parse(cli(["status", "--human", "dana", "--json"]));
  assert.equal(status.unread.total, 0);

  mkdirSync(artifacts, { recursive: true });
  await live(page);
  asAlice(["send", "--to", "human:dana", "--subject", "One more thing", "--body", "after the drain"]);
  await page.getByRole("link", { name: "One more thing" }).waitFor({ timeout: 10000 });
  await page.screenshot({ path: join(artifacts, "inbox.png"), fullPage: true });

  // A form post from another origin, with dana's cookie in the browser, is
  // refused: from another site (localhost), and from the same site on
  // another port, where SameSite=Strict still sends the cookie.
  for (const host of ["localhost", "127.0.0.1"]) {
    const forged = await context.newPage();
    const response = forged.waitForResponse((r) => r.url() === base + "/send");
    await forged.goto(`http://${host}:${attacker.address().port}/`);
    assert.equal((await response).status(), 403, "forged post from " + host);
    await forged.close();
  }
  const after = JSON.parse(asAlice(["inbox", "--json"]));
  assert.equal(after.messages.filter((m) => m.subject === "forged").length, 0, "the forged post was sent");

  await context.close();
}
