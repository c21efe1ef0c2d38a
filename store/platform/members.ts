/** Reads of workspace members. */
import type { Db } from '../../db/sql.js';

/** The identity-provider user id of a member; null when there is no such member. */
export async function memberIdpUserId(sql: Db, memberId: string): Promise<string | null> {
  const [member] = await sql<{ idp_user_id: string }[]>`select idp_user_id from members where id = ${memberId}`;
  return member?.idp_user_id ?? null;
}
