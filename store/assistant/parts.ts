/**
 * An answer's stream parts, written as they stream (so a reconnecting client gets the rest of the
 * same answer, and a retried turn knows what it already said), and the model steps a turn has
 * finished (so a retried turn never asks the model again for them). Every write NOTIFYs the
 * message's id on one channel; the API's streams wake on it and read the new parts.
 */
import type { Db } from '../../db/sql.js';
import type { StreamPart } from '../../domain/assistant/stream.js';

export const assistantPartsChannel = 'assistant_parts';

/**
 * Appends parts after the message's last one. Numbered in the statement, so two writers of one
 * message (never the case: one turn writes an answer) would still not share a number.
 */
export async function appendParts(db: Db, messageId: string, parts: StreamPart[]): Promise<number> {
  if (parts.length === 0) return lastSeq(db, messageId);
  const [row] = await db<{ last: number }[]>`
    with base as (select coalesce(max(seq), 0) as seq from assistant_message_parts where message_id = ${messageId}),
    added as (
      insert into assistant_message_parts (message_id, seq, part)
      select ${messageId}, base.seq + p.ord, p.part
      from base, jsonb_array_elements(${db.json(parts as never)}::jsonb) with ordinality as p (part, ord)
      returning seq
    ), notified as (select pg_notify(${assistantPartsChannel}, ${messageId}))
    select (select max(seq) from added) as last, (select count(*) from notified) as n`;
  return row!.last;
}

export async function lastSeq(db: Db, messageId: string): Promise<number> {
  const [row] = await db<
    { seq: number | null }[]
  >`select max(seq) as seq from assistant_message_parts where message_id = ${messageId}`;
  return row?.seq ?? 0;
}

export async function readParts(
  db: Db,
  messageId: string,
  afterSeq: number,
  limit = 500,
): Promise<{ seq: number; part: StreamPart }[]> {
  return db<{ seq: number; part: StreamPart }[]>`
    select seq, part from assistant_message_parts where message_id = ${messageId} and seq > ${afterSeq} order by seq limit ${limit}`;
}

/** A model step's result as the turn recorded it. */
export interface ModelStepResult {
  text: string;
  toolCalls: { id: string; name: string; arguments: string }[];
  promptTokens: number;
  completionTokens: number;
}

export async function findModelStep(db: Db, messageId: string, step: number): Promise<ModelStepResult | undefined> {
  const [row] = await db<
    { result: ModelStepResult }[]
  >`select result from assistant_model_steps where message_id = ${messageId} and step = ${step}`;
  return row?.result;
}

export async function recordModelStep(db: Db, messageId: string, step: number, result: ModelStepResult): Promise<void> {
  await db`
    insert into assistant_model_steps (message_id, step, result) values (${messageId}, ${step}, ${db.json(result as never)})
    on conflict (message_id, step) do nothing`;
}

/** Appends a tool call's result parts unless the call already has a result: a retried proposal writes them once. */
export async function appendToolOutput(
  db: Db,
  messageId: string,
  toolCallId: string,
  parts: StreamPart[],
): Promise<void> {
  const [done] = await db`
    select 1 from assistant_message_parts where message_id = ${messageId} and part->>'toolCallId' = ${toolCallId}
      and part->>'type' in ('tool-output-available', 'tool-output-error') limit 1`;
  if (!done) await appendParts(db, messageId, parts);
}

/** The text of an answer: its finished model steps' text, in order. */
export async function answerText(db: Db, messageId: string): Promise<string> {
  const [row] = await db<{ text: string | null }[]>`
    select string_agg(result->>'text', '' order by step) as text from assistant_model_steps where message_id = ${messageId}`;
  return row?.text ?? '';
}

/** Text blocks of an answer started and never ended (an attempt interrupted mid-text), in order. */
export async function openTextBlocks(db: Db, messageId: string): Promise<string[]> {
  const rows = await db<{ id: string }[]>`
    select s.part->>'id' as id from assistant_message_parts s
    where s.message_id = ${messageId} and s.part->>'type' = 'text-start'
      and not exists (select 1 from assistant_message_parts e where e.message_id = s.message_id and e.part->>'type' = 'text-end' and e.part->>'id' = s.part->>'id')
    order by s.seq`;
  return rows.map((r) => r.id);
}
