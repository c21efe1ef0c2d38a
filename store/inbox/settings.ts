/** A workspace's inbox settings: the webhook secret and the address replies go from. */
import type { Db } from '../../db/sql.js';

export interface SettingsRow {
  webhook_secret: string | null;
  webhook_secret_rotated_at: Date | null;
  reply_from_address: string | null;
  reply_from_name: string | null;
}

export async function readSettings(db: Db, workspaceId: string): Promise<SettingsRow> {
  const [row] = await db<SettingsRow[]>`select * from inbox_settings where workspace_id = ${workspaceId}`;
  return (
    row ?? { webhook_secret: null, webhook_secret_rotated_at: null, reply_from_address: null, reply_from_name: null }
  );
}

/** Writes the reply-from fields given (`undefined` keeps the stored value; `address` is already normalized). */
export async function upsertReplyFrom(
  db: Db,
  workspaceId: string,
  patch: { reply_from_address?: string | null; reply_from_name?: string | null },
  address: string | null,
): Promise<void> {
  await db`
    insert into inbox_settings (workspace_id, reply_from_address, reply_from_name) values (${workspaceId}, ${address}, ${patch.reply_from_name ?? null})
    on conflict (workspace_id) do update set
      reply_from_address = case when ${patch.reply_from_address !== undefined} then excluded.reply_from_address else inbox_settings.reply_from_address end,
      reply_from_name = case when ${patch.reply_from_name !== undefined} then excluded.reply_from_name else inbox_settings.reply_from_name end,
      updated_at = now()`;
}

/** Stores a new webhook secret; answers when it was rotated. */
export async function storeWebhookSecret(db: Db, workspaceId: string, secret: string): Promise<Date> {
  const [row] = await db<{ rotated_at: Date }[]>`
    insert into inbox_settings (workspace_id, webhook_secret, webhook_secret_rotated_at) values (${workspaceId}, ${secret}, now())
    on conflict (workspace_id) do update set webhook_secret = excluded.webhook_secret, webhook_secret_rotated_at = now(), updated_at = now()
    returning webhook_secret_rotated_at as rotated_at`;
  return row!.rotated_at;
}
