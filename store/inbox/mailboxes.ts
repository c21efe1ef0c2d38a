/** IMAP mailboxes: their settings, and the polling cursor (UIDVALIDITY and last UID) moved by compare-and-set. */
import type { Db } from '../../db/sql.js';
import type { MailboxCreate } from '../../domain/inbox/inbox.js';

/** A mailbox as the routes show it (never the password). */
export interface MailboxRow {
  id: string;
  workspace_id: string;
  address: string;
  host: string;
  port: number;
  secure: boolean;
  username: string;
  folder: string;
  poll_seconds: number;
  enabled: boolean;
  uid_validity: number | null;
  last_uid: number;
  messages_recorded: number;
  last_polled_at: Date | null;
  last_error: string | null;
  created_at: Date;
}

/** A mailbox as polling reads it, password included. */
export interface PollMailboxRow {
  id: string;
  workspace_id: string;
  host: string;
  port: number;
  secure: boolean;
  username: string;
  /** The password as sealed (services/platform/sealing.ts); opened only to log in. */
  password_sealed: string;
  folder: string;
  poll_seconds: number;
  enabled: boolean;
  uid_validity: number | null;
  last_uid: number;
}

const mailboxColumns = (
  db: Db,
) => db`id, workspace_id, address, host, port, secure, username, folder, poll_seconds, enabled, uid_validity, last_uid,
  messages_recorded, last_polled_at, last_error, created_at`;

/** undefined when the workspace already reads that folder of that user on that host. */
export async function insertMailbox(
  db: Db,
  workspaceId: string,
  m: Omit<MailboxCreate, 'password'>,
  passwordSealed: string,
): Promise<MailboxRow | undefined> {
  const [row] = await db<MailboxRow[]>`
    insert into inbox_mailboxes (workspace_id, address, host, port, secure, username, password_sealed, folder, poll_seconds)
    values (${workspaceId}, ${m.address.toLowerCase()}, ${m.host.toLowerCase()}, ${m.port}, ${m.secure}, ${m.username}, ${passwordSealed}, ${m.folder}, ${m.poll_seconds})
    on conflict (workspace_id, host, username, folder) do nothing
    returning ${mailboxColumns(db)}`;
  return row;
}

export async function mailboxRows(db: Db, workspaceId: string): Promise<MailboxRow[]> {
  return db<
    MailboxRow[]
  >`select ${mailboxColumns(db)} from inbox_mailboxes where workspace_id = ${workspaceId} order by created_at, id`;
}

export async function mailboxRow(db: Db, workspaceId: string, mailboxId: string): Promise<MailboxRow | undefined> {
  const [row] = await db<
    MailboxRow[]
  >`select ${mailboxColumns(db)} from inbox_mailboxes where id = ${mailboxId} and workspace_id = ${workspaceId}`;
  return row;
}

/**
 * Writes a mailbox's settings and cursor as given (the caller resets the cursor when the host,
 * user or folder changed). A taken (host, user, folder) rejects with the unique violation, 23505.
 */
export async function setMailbox(
  db: Db,
  workspaceId: string,
  mailboxId: string,
  m: {
    host: string;
    username: string;
    folder: string;
    port: number;
    secure: boolean;
    passwordSealed: string | null;
    poll_seconds: number;
    enabled: boolean;
    uid_validity: number | null;
    last_uid: number;
  },
): Promise<MailboxRow | undefined> {
  const [row] = await db<MailboxRow[]>`
      update inbox_mailboxes set host = ${m.host}, username = ${m.username}, folder = ${m.folder}, port = ${m.port},
        secure = ${m.secure}, password_sealed = coalesce(${m.passwordSealed}, password_sealed),
        poll_seconds = ${m.poll_seconds}, enabled = ${m.enabled},
        uid_validity = ${m.uid_validity}, last_uid = ${m.last_uid}, last_error = null, updated_at = now()
      where id = ${mailboxId} and workspace_id = ${workspaceId}
      returning ${mailboxColumns(db)}`;
  return row;
}

export async function deleteMailbox(db: Db, workspaceId: string, mailboxId: string): Promise<boolean> {
  return (
    (await db`delete from inbox_mailboxes where id = ${mailboxId} and workspace_id = ${workspaceId} returning id`)
      .length === 1
  );
}

// Polling

export async function mailboxToPoll(db: Db, mailboxId: string): Promise<PollMailboxRow | undefined> {
  const [box] = await db<PollMailboxRow[]>`select * from inbox_mailboxes where id = ${mailboxId}`;
  return box;
}

export async function recordPollFailed(db: Db, mailboxId: string, message: string): Promise<void> {
  await db`update inbox_mailboxes set last_polled_at = now(), last_error = ${message}, updated_at = now() where id = ${mailboxId}`;
}

/** The server renumbered the folder: read it again from the start. */
export async function restartMailboxCursor(db: Db, mailboxId: string, uidValidity: number): Promise<void> {
  await db`update inbox_mailboxes set uid_validity = ${uidValidity}, last_uid = 0, updated_at = now() where id = ${mailboxId}`;
}

/** Moves the cursor past one recorded message, only forward and only under the same UIDVALIDITY. */
export async function advanceMailboxCursor(
  db: Db,
  mailboxId: string,
  uidValidity: number | null,
  uid: number,
  fresh: boolean,
): Promise<void> {
  await db`
            update inbox_mailboxes set last_uid = ${uid}, messages_recorded = messages_recorded + ${fresh ? 1 : 0}, updated_at = now()
            where id = ${mailboxId} and uid_validity = ${uidValidity} and last_uid < ${uid}`;
}

/** A poll that read its range: no error, and the cursor at least at `lastUid` (under the same UIDVALIDITY). */
export async function recordPollDone(
  db: Db,
  mailboxId: string,
  uidValidity: number | null,
  lastUid: number,
): Promise<void> {
  await db`update inbox_mailboxes set last_polled_at = now(), last_error = null, last_uid = greatest(last_uid, ${lastUid}), updated_at = now()
      where id = ${mailboxId} and uid_validity = ${uidValidity}`;
}
