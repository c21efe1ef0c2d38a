/**
 * `npm run bench:sequences`: sequences at 10,000 contacts.
 *
 * Starts the local stack (bench/serve.ts: embedded Postgres, the Temporal dev server, worker and
 * API in one process) on a temporary DATA_DIR with SMTP_URL pointing at a receiving SMTP server
 * in this process (sim/smtp-sink.ts), then through the HTTP API as a client would: an audience
 * table of BENCH_CONTACTS rows, BENCH_SENDERS sender profiles each with its mailbox, and an
 * automatic sequence of BENCH_EMAILS email steps with waits of BENCH_WAIT_MINUTES between them
 * (outside business hours, so the run takes minutes), launched. It then
 *   enrols  every row through POST /sequences/{id}/contacts/ (batches of 1,000, two at a time),
 *           which records each contact and starts its workflow: enrolments per second;
 *   runs    until every contact has finished, or for BENCH_SECONDS (600) at most: sequence steps
 *           executed per second (emails, waits and ends passed) and emails taken by the sink per
 *           second. On the shared 2-core machine 50,000 emails take far longer than a few minutes,
 *           so a default run measures the rate over that window and leaves the rest unsent;
 *   reads   every sequence-contact workflow's history length from Temporal (and the full history
 *           of the largest and of a random sample, BENCH_HISTORIES): the largest history, and when
 *           contacts are still under way, its projection to the end of the sequence (the most
 *           events per step passed among the histories read, times the steps of the sequence);
 * and the peak resident memory of the API+worker process and of Temporal, sampled from /proc.
 * Before enrolling it measures the server's own ceiling: BENCH_BASELINE_STARTS (2,000) bare starts
 * of a workflow no worker runs, with the search attributes a contact's workflow carries.
 * Duplicate Message-IDs at the sink are counted too (there must be none).
 */
import { Client, Connection } from '@temporalio/client';
import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { createSql } from '../db/sql.js';
import { sequenceContactWorkflowId } from '../workflows/sequences/sequence-contact.contract.js';
import { createWorkspaceWithAdmin } from '../worker/provisioning.js';
import { mapLimit } from '../sim/chaos-run.js';
import { enrolRows, httpApi, setUpOutreach } from '../sim/chaos-sequences.js';
import { startSmtpSink } from '../sim/smtp-sink.js';
import { cpuPercent, cpuSnapshot, type Component } from './cpu.js';
import { startBenchStack } from './stack.js';
import { ContactIdKey, SequenceIdKey, WorkspaceIdKey } from '../workflows/shared/search-attributes.js';

const contactsWanted = Number(process.env.BENCH_CONTACTS ?? 10_000);
const emails = Number(process.env.BENCH_EMAILS ?? 5);
const waitMinutes = Number(process.env.BENCH_WAIT_MINUTES ?? 1);
const senderCount = Number(process.env.BENCH_SENDERS ?? 5);
const enrolBatch = Number(process.env.BENCH_ENROL_BATCH ?? 1000);
const enrolConcurrency = Number(process.env.BENCH_ENROL_CONCURRENCY ?? 2);
const runSeconds = Number(process.env.BENCH_SECONDS ?? 600);
const historySample = Number(process.env.BENCH_HISTORIES ?? 200);
const targets = { enrolSeconds: 60, enrolContacts: 10_000, maxHistory: 1000 };

const log = (line: string) => process.stdout.write(`[${new Date().toISOString().slice(11, 19)}] ${line}\n`);
const n = (v: number) => Math.round(v).toLocaleString('en-US');

/** Resident memory now (VmRSS) and at its highest (VmHWM) of a process, in MiB. */
function memory(pid: number | undefined): { rss: number; hwm: number } {
  if (!pid) return { rss: 0, hwm: 0 };
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kib = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? 0);
    return { rss: kib('VmRSS') / 1024, hwm: kib('VmHWM') / 1024 };
  } catch {
    return { rss: 0, hwm: 0 };
  }
}

const baselineStarts = Number(process.env.BENCH_BASELINE_STARTS ?? 2000);

/** Starts `count` workflows on a task queue no worker polls: what one start costs the server alone. */
async function bareStarts(client: Client, count: number, concurrency: number): Promise<{ seconds: number }> {
  const keys = [WorkspaceIdKey, SequenceIdKey, ContactIdKey];
  const t = performance.now();
  await mapLimit(
    Array.from({ length: count }, (_, i) => i),
    concurrency,
    (i) =>
      client.workflow.start('benchBareStart', {
        taskQueue: 'bench-bare-starts',
        workflowId: `bench-bare-start/${i}`,
        typedSearchAttributes: keys.map((key) => ({ key, value: `bare-${i}` })),
      }),
  );
  return { seconds: (performance.now() - t) / 1000 };
}

async function main() {
  const dataDir = mkdtempSync(join(tmpdir(), 'bench-sequences-'));
  // As root, Postgres runs as its own user, which must reach its data folder.
  chmodSync(dataDir, 0o755);
  const logFile = `${dataDir}.log`;
  const sink = await startSmtpSink();
  // The stack's worker reads these when it starts (startServe passes this process's environment).
  process.env.SMTP_URL = sink.url;
  process.env.SMTP_FROM = 'outreach@bench.example';
  log(`starting the stack (DATA_DIR ${dataDir}, log ${logFile}); SMTP sink at ${sink.url}`);
  const { serve, pids } = await startBenchStack(dataDir, logFile, log, { onFailure: () => sink.close() });
  const sql = createSql(serve.databaseUrl, { max: 4 });
  const connection = await Connection.connect({ address: serve.temporalAddress });
  const temporal = new Client({ connection });
  const peak = { api: 0, temporal: 0 };
  const sampler = setInterval(() => {
    peak.api = Math.max(peak.api, memory(pids.api).rss);
    peak.temporal = Math.max(peak.temporal, memory(pids.temporal).rss);
  }, 250);
  let failed = false;
  try {
    const admin = await createWorkspaceWithAdmin(sql, { name: 'Bench sequences', plan: 'paid' });
    const api = httpApi(() => serve.apiUrl, admin.api_key);
    let t = performance.now();
    const setup = await setUpOutreach(api, {
      contacts: contactsWanted,
      senders: senderCount,
      emails,
      waitMinutes,
      emailOf: (i) => `person${i}@audience${i % 50}.example`,
      label: 'Bench',
    });
    log(
      `audience of ${n(setup.rows.length)} rows, ${setup.senders.length} senders and a ${emails}-email sequence (waits of ${waitMinutes} min) in ${((performance.now() - t) / 1000).toFixed(1)} s`,
    );

    // The server's own ceiling: bare starts of a workflow nobody runs (a task queue without a
    // worker), with the three search attributes a contact's workflow carries, from this process.
    const baseline = await bareStarts(temporal, baselineStarts, 64);
    log(
      `baseline: ${n(baselineStarts)} bare workflow starts in ${baseline.seconds.toFixed(1)} s (${n(baselineStarts / baseline.seconds)}/s)`,
    );

    // Enrolment: every row through the API; each answer means the contact is recorded and its workflow started.
    const idle = memory(pids.api).rss;
    const cpuBefore = cpuSnapshot(pids);
    t = performance.now();
    const enrolStartedAt = Date.now();
    const answers = await enrolRows(
      api,
      setup.sequenceId,
      setup.rows.map((r) => r.rowId),
      { batch: enrolBatch, concurrency: enrolConcurrency },
    );
    const enrolSeconds = (performance.now() - t) / 1000;
    const enrolCpu = cpuPercent(cpuBefore, cpuSnapshot(pids));
    const enrolled = answers.filter((a) => a.status === 'enrolled').length;
    if (enrolled !== setup.rows.length) {
      const reasons = [...new Set(answers.filter((a) => a.status !== 'enrolled').map((a) => a.reason ?? a.status))];
      throw new Error(`${setup.rows.length - enrolled} rows were not enrolled: ${reasons.join(', ')}`);
    }
    log(`enrolled ${n(enrolled)} contacts in ${enrolSeconds.toFixed(1)} s (${n(enrolled / enrolSeconds)}/s)`);

    // Progression: until every contact finished, or the deadline.
    const order = [
      ...Array.from({ length: emails }, (_, k) => [
        `email_${k + 1}`,
        ...(k + 1 < emails && waitMinutes > 0 ? [`wait_${k + 1}`] : []),
      ]).flat(),
      'done',
    ];
    const graphSteps = order.length;
    const deadline = Date.now() + runSeconds * 1000;
    let lastPrint = 0;
    let open = enrolled;
    let lastCompletionAt = enrolStartedAt;
    const cpuRunBefore = cpuSnapshot(pids);
    for (;;) {
      const rows = await sql<{ status: string; n: number; last: Date | null }[]>`
        select status, count(*)::int as n, max(finished_at) as last from sequence_contacts where sequence_id = ${setup.sequenceId} group by status`;
      open = rows.filter((r) => !['completed', 'stopped'].includes(r.status)).reduce((a, r) => a + r.n, 0);
      for (const r of rows) if (r.last) lastCompletionAt = Math.max(lastCompletionAt, r.last.getTime());
      if (open === 0 || Date.now() > deadline) break;
      if (Date.now() - lastPrint > 10_000) {
        lastPrint = Date.now();
        log(
          `  contacts ${rows.map((r) => `${r.status} ${n(r.n)}`).join(', ')}; emails taken ${n(sink.messages.length)}; API+worker RSS ${memory(pids.api).rss.toFixed(0)} MiB`,
        );
      }
      await sleep(1000);
    }
    const runCpu = cpuPercent(cpuRunBefore, cpuSnapshot(pids));
    if (open > 0) log(`gave up after ${runSeconds} s with ${n(open)} contacts still going (BENCH_SECONDS)`);
    const runEnd = open > 0 ? Date.now() : lastCompletionAt;
    const positions = await sql<{ id: string; status: string; current_step_id: string | null }[]>`
      select id, status, current_step_id from sequence_contacts where sequence_id = ${setup.sequenceId}`;
    // A contact passed every step before the one it stands on; a completed one passed them all.
    const passed = new Map(
      positions.map((c) => [
        c.id,
        c.status === 'completed' ? graphSteps : Math.max(0, order.indexOf(c.current_step_id ?? order[0]!)),
      ]),
    );
    const stepsExecuted = [...passed.values()].reduce((a, b) => a + b, 0);
    const completed = positions.filter((c) => c.status === 'completed').length;
    const runSecondsMeasured = (runEnd - enrolStartedAt) / 1000;
    const times = sink.messages.map((m) => m.receivedAt);
    const emailWindow = times.length > 1 ? (Math.max(...times) - Math.min(...times)) / 1000 : 0;
    const duplicates = sink.duplicateMessageIds().size;
    log(
      `${n(completed)} of ${n(enrolled)} contacts completed in ${runSecondsMeasured.toFixed(0)} s; ${n(stepsExecuted)} steps executed; ${n(sink.messages.length)} emails taken`,
    );

    // Histories: every workflow's length from the list, and the full history of the largest and a sample.
    log('reading the sequence-contact workflows from Temporal');
    const listed: { id: string; length: number }[] = [];
    for await (const wf of temporal.workflow.list({ query: `WorkflowType = 'sequenceContactWorkflow'` })) {
      listed.push({ id: wf.workflowId, length: wf.historyLength });
    }
    // The list's lengths of running workflows may lag: read in full the contacts furthest along
    // (from Postgres) and a random sample of the rest, each workflow's current run.
    const byProgress = [...passed].sort((a, b) => b[1] - a[1]).map(([id]) => id);
    const furthest = byProgress.slice(0, Math.ceil(historySample / 2));
    const others = byProgress
      .slice(furthest.length)
      .sort(() => Math.random() - 0.5)
      .slice(0, Math.floor(historySample / 2));
    const read = [...furthest, ...others].map((contactId) => ({
      contactId,
      id: sequenceContactWorkflowId(setup.sequenceId, contactId),
    }));
    const fetched = await mapLimit(
      read,
      16,
      async (wf) => (await temporal.workflow.getHandle(wf.id).fetchHistory()).events?.length ?? 0,
    );
    const maxHistory = Math.max(0, ...listed.map((w) => w.length), ...fetched);
    // Events per step the contact has passed.
    const perStep = read.flatMap((wf, i) => {
      const steps = passed.get(wf.contactId) ?? 0;
      return steps > 0 ? [fetched[i]! / steps] : [];
    });
    const projectedHistory = Math.ceil(Math.max(0, ...perStep) * graphSteps);
    const meanHistory = fetched.length ? fetched.reduce((a, b) => a + b, 0) / fetched.length : 0;
    peak.api = Math.max(peak.api, memory(pids.api).hwm);
    peak.temporal = Math.max(peak.temporal, memory(pids.temporal).hwm);

    const met = (ok: boolean) => (ok ? 'met' : 'MISSED');
    const ratio = (a: number, b: number) => (b > 0 ? `${(a / b).toFixed(2)}×` : 'n/a');
    const enrolTargetSeconds = (targets.enrolSeconds * enrolled) / targets.enrolContacts;
    const rows: string[][] = [
      [
        `enrolment of ${n(enrolled)} contacts (recorded + workflow started)`,
        `${enrolSeconds.toFixed(1)} s`,
        `< ${enrolTargetSeconds.toFixed(0)} s`,
        ratio(enrolSeconds, enrolTargetSeconds),
        met(enrolSeconds < enrolTargetSeconds),
      ],
      [
        'enrolments per second',
        n(enrolled / enrolSeconds),
        `> ${n(targets.enrolContacts / targets.enrolSeconds)}`,
        ratio(enrolled / enrolSeconds, targets.enrolContacts / targets.enrolSeconds),
        met(enrolled / enrolSeconds > targets.enrolContacts / targets.enrolSeconds),
      ],
      [
        `  baseline: bare workflow starts per second on the same server (${n(baselineStarts)}, no worker)`,
        n(baselineStarts / baseline.seconds),
        '',
        `enrolment ${ratio(enrolled / enrolSeconds, baselineStarts / baseline.seconds)}`,
        '',
      ],
      [
        `sequence steps executed per second (emails, waits, ends; ${n(stepsExecuted)} in ${runSecondsMeasured.toFixed(0)} s)`,
        (stepsExecuted / runSecondsMeasured).toFixed(1),
        '',
        '',
        '',
      ],
      [
        `emails taken by the SMTP sink per second (${n(sink.messages.length)} over ${emailWindow.toFixed(0)} s)`,
        emailWindow > 0 ? (sink.messages.length / emailWindow).toFixed(1) : 'n/a',
        '',
        '',
        '',
      ],
      [
        `contacts completed within the run`,
        `${n(completed)} of ${n(enrolled)}`,
        '',
        '',
        completed < enrolled ? `the rest still going after ${runSeconds} s (BENCH_SECONDS)` : '',
      ],
      ['duplicate Message-IDs at the sink', String(duplicates), '0', '', met(duplicates === 0)],
      [
        `largest workflow history (${n(listed.length)} listed, ${fetched.length} read in full; mean of those ${meanHistory.toFixed(0)})`,
        `${n(maxHistory)} events`,
        `≤ ${n(targets.maxHistory)}`,
        ratio(maxHistory, targets.maxHistory),
        met(maxHistory <= targets.maxHistory),
      ],
      ...(completed < enrolled
        ? [
            [
              `  projected at the end of the sequence (most events per step passed × ${graphSteps} steps)`,
              `${n(projectedHistory)} events`,
              `≤ ${n(targets.maxHistory)}`,
              ratio(projectedHistory, targets.maxHistory),
              met(projectedHistory <= targets.maxHistory),
            ],
          ]
        : []),
      [
        'peak RSS, API + worker process',
        `${peak.api.toFixed(0)} MiB`,
        '',
        '',
        `idle before enrolment ${idle.toFixed(0)} MiB`,
      ],
      ['peak RSS, Temporal dev server', `${peak.temporal.toFixed(0)} MiB`, '', '', ''],
    ];
    const cpuText = (c: Record<Component, number>) =>
      `API+worker ${c.api}%, Postgres ${c.postgres}%, Temporal ${c.temporal}%, this bench (and the sink) ${c.bench}%, other ${c.other}%`;
    const line = (cells: string[]) => `| ${cells.join(' | ')} |`;
    const header = ['Measure', 'Value', 'Target', 'Ratio', 'Result'];
    process.stdout.write(
      [
        '',
        `Machine: ${cpus().length} × ${cpus()[0]?.model.trim() ?? 'CPU'}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}, load average ${loadavg()
          .map((l) => l.toFixed(1))
          .join(' ')}; ${n(enrolled)} contacts, ${emails} emails, waits of ${waitMinutes} min, ${senderCount} senders.`,
        '',
        line(header),
        line(header.map(() => '---')),
        ...rows.map(line),
        '',
        'CPU (percent of one core; "other" is everything else on the machine):',
        `  enrolment: ${cpuText(enrolCpu)}`,
        `  progression: ${cpuText(runCpu)}`,
        '',
      ].join('\n'),
    );
    if (duplicates > 0) failed = true;
  } catch (error) {
    failed = true;
    process.stderr.write(`bench failed: ${error instanceof Error ? error.stack : String(error)}\n`);
  } finally {
    clearInterval(sampler);
    await connection.close().catch(() => {});
    await sql.end({ timeout: 5 }).catch(() => {});
    log('stopping the stack');
    await serve.stop();
    await sink.close();
    rmSync(dataDir, { recursive: true, force: true });
    // pino writes JSON lines; level 40 and above are warnings and errors.
    const warnings = readFileSync(logFile, 'utf8')
      .split('\n')
      .filter((l) => /"level":\s*[4-6]\d/.test(l)).length;
    if (failed || warnings > 0) log(`the stack logged ${warnings} warnings or errors: ${logFile}`);
    else rmSync(logFile, { force: true });
  }
  process.exit(failed ? 1 : 0);
}

await main();
