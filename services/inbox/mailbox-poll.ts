import { ImapFlow } from 'imapflow';
import { SealedSecretError, unseal, type Keyring } from '../../integrations/secrets/sealed.js';
import { mailboxPasswordContext } from './inbox.js';
import { lookup as dnsLookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { isPrivateAddress } from '../../integrations/web/web-page.js';
import { type Sql } from '../../db/sql.js';
import type { MailboxPollResult } from '../../domain/inbox/inbox.js';
import { recordInboundEmail, InboundEmailError } from '../../store/inbox/messages.js';
import {
  advanceMailboxCursor,
  mailboxToPoll,
  recordPollDone,
  recordPollFailed,
  restartMailboxCursor,
  type PollMailboxRow,
} from '../../store/inbox/mailboxes.js';

// ---------------------------------------------------------------------------------------------
// IMAP polling (workflows/mailbox-poll.ts runs one per mailbox)

export type MailboxRow = PollMailboxRow;

/** Whether mailboxes may be on private, loopback or link-local addresses (MAILBOX_ALLOW_PRIVATE_NETWORKS). */
export interface MailboxNetwork {
  allowPrivateNetworks: boolean;
}

/**
 * The address to connect to for a mailbox host. A workspace names the host, so without this the
 * service could be pointed at its own network (the same rule as the page reader's).
 */
export async function publicAddressOf(host: string, allowPrivate: boolean): Promise<string> {
  const addresses = await dnsLookup(host, { all: true }).catch(() => {
    throw new Error(`The mailbox host ${host} could not be found.`);
  });
  if (addresses.length === 0) throw new Error(`The mailbox host ${host} could not be found.`);
  if (!allowPrivate && addresses.some((a) => isPrivateAddress(a.address))) {
    throw new Error(`The mailbox host ${host} is in a private network; mailboxes must be reachable on the internet.`);
  }
  return addresses[0]!.address;
}

/** Messages read per poll, so one poll stays within its activity timeout. */
export const mailboxBatchMax = 200;

/**
 * Reads the new messages of one mailbox folder (read-only, nothing is marked seen), records each
 * through the same path as the webhook, and moves the cursor past each as it is recorded
 * (compare-and-set under the same UIDVALIDITY), so a retried poll starts where the last left off.
 */
export async function pollMailbox(
  sql: Sql,
  mailboxId: string,
  onStop: (workspaceId: string, emails: string[]) => Promise<void> = async () => {},
  options: MailboxNetwork = { allowPrivateNetworks: false },
  keyring?: Keyring,
): Promise<MailboxPollResult> {
  const box = await mailboxToPoll(sql, mailboxId);
  if (!box) return { state: 'gone', recorded: 0, more: false, pollSeconds: 0, uidValidity: null, lastUid: 0 };
  const base = { pollSeconds: box.poll_seconds, uidValidity: box.uid_validity, lastUid: box.last_uid };
  if (!box.enabled) return { state: 'disabled', recorded: 0, more: false, ...base };
  let address: string;
  try {
    address = await publicAddressOf(box.host, options.allowPrivateNetworks);
  } catch (err) {
    const message = String((err as Error).message ?? err).slice(0, 500);
    await recordPollFailed(sql, box.id, message);
    return { state: 'failed', recorded: 0, more: false, ...base };
  }
  let password: string;
  try {
    if (!keyring) throw new SealedSecretError('unknown_key', 'No sealing key is at hand.');
    password = unseal(keyring, box.password_sealed, mailboxPasswordContext(box.workspace_id));
  } catch (err) {
    if (!(err instanceof SealedSecretError)) throw err;
    await recordPollFailed(
      sql,
      box.id,
      'The stored password cannot be opened (it was stored before passwords were sealed, or under another SECRETS_KEY): set the password again.',
    );
    return { state: 'failed', recorded: 0, more: false, ...base };
  }
  // Connect to the address checked, not the name again (a second lookup could answer otherwise);
  // TLS still verifies the certificate against the name.
  const client = new ImapFlow({
    host: address,
    port: box.port,
    secure: box.secure,
    auth: { user: box.username, pass: password },
    logger: false,
    ...(isIP(box.host) ? {} : { servername: box.host }),
    disableAutoIdle: true,
    connectionTimeout: 20_000,
    greetingTimeout: 10_000,
    socketTimeout: 60_000,
  });
  client.on('error', () => {}); // surfaced by the awaited call that failed
  let recorded = 0;
  let more = false;
  const stopped: string[] = [];
  let validity = box.uid_validity;
  let last = box.last_uid;
  try {
    await client.connect();
    const lock = await client.getMailboxLock(box.folder, { readOnly: true });
    try {
      const opened = client.mailbox;
      if (!opened) throw new Error(`The folder ${box.folder} could not be opened.`);
      const current = Number(opened.uidValidity);
      if (validity !== current) {
        // The server renumbered the folder: read it again from the start.
        await restartMailboxCursor(sql, box.id, current);
        validity = current;
        last = 0;
      }
      const newest = opened.uidNext - 1;
      if (newest > last) {
        const upTo = Math.min(newest, last + mailboxBatchMax);
        more = upTo < newest;
        const fetched: { uid: number; source: Buffer }[] = [];
        for await (const message of client.fetch(`${last + 1}:${upTo}`, { uid: true, source: true }, { uid: true })) {
          // `n:m` can answer with the newest message even below n; the cursor decides.
          if (message.uid > last && message.source) fetched.push({ uid: message.uid, source: message.source });
        }
        for (const message of fetched.sort((a, b) => a.uid - b.uid)) {
          let fresh = false;
          try {
            const result = await recordInboundEmail(sql, box.workspace_id, message.source);
            fresh = !result.duplicate;
            if (fresh && result.wakeEmail) stopped.push(result.wakeEmail);
          } catch (err) {
            // A message that cannot be filed is passed over, not read again forever.
            if (!(err instanceof InboundEmailError)) throw err;
          }
          await advanceMailboxCursor(sql, box.id, validity, message.uid, fresh);
          last = message.uid;
          if (fresh) recorded++;
        }
        // Every message of the range is recorded; UIDs missing from it (expunged) are passed over.
        last = upTo;
      }
    } finally {
      lock.release();
    }
    await client.logout();
    // The replies that stop these contacts are committed above; waking their sequences only hurries
    // them along: every sequence move reads contact_stop_reason() first (docs/architecture.md).
    if (stopped.length > 0) await onStop(box.workspace_id, stopped).catch(() => undefined);
    await recordPollDone(sql, box.id, validity, last);
    return { state: 'polled', recorded, more, pollSeconds: box.poll_seconds, uidValidity: validity, lastUid: last };
  } catch (err) {
    client.close();
    const message = String((err as Error).message ?? err).slice(0, 500);
    await recordPollFailed(sql, box.id, message);
    return {
      state: 'failed',
      recorded,
      more: false,
      pollSeconds: box.poll_seconds,
      uidValidity: validity,
      lastUid: last,
    };
  }
}
