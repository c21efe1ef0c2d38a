/**
 * A business-context document's summary: by the chat model when one is configured (each chunk's
 * notes, then one summary of them), else the local extractive summary, which says it is an extract.
 */
import {
  chunkText,
  clipSummary,
  extractiveSummary,
  localSummarySource,
  modelSummarySource,
  summaryMax,
} from '../../domain/documents/documents.js';
import type { ChatModel } from '../../integrations/chat-model.js';

export interface WrittenSummary {
  text: string;
  source: string;
  /** How it was written, for the step's detail. */
  detail: string;
}

const instructions =
  "You summarise a company's own business document so a sales assistant knows what the workspace sells. " +
  'Write Markdown bullet points: what the company does, for whom, its offers and prices, proof points. ' +
  `Use only facts stated in the document; no preamble. At most ${summaryMax - 300} characters.`;

/** Chunks a model call reads at most, and the characters of one call's document text. */
const chunksMax = 12;
const callChars = 16_000;

export async function summariseText(
  chunks: string[],
  model: ChatModel | null,
  signal?: AbortSignal,
): Promise<WrittenSummary | null> {
  const text = chunks.join('');
  if (!model) {
    const summary = extractiveSummary(text);
    return summary
      ? { text: summary, source: localSummarySource, detail: 'local extractive summary (no chat model configured)' }
      : null;
  }
  const ask = async (content: string, task: string) =>
    (
      await model.complete({
        messages: [
          { role: 'system', content: instructions },
          { role: 'user', content: `${task}\n\n${content}` },
        ],
        maxTokens: 700,
        temperature: 0.2,
        ...(signal ? { signal } : {}),
      })
    ).content;
  let source = text;
  let calls = 0;
  let cut = '';
  if (text.length > callChars) {
    const all = chunkText(text, callChars);
    const parts = all.slice(0, chunksMax);
    if (all.length > parts.length) cut = `; only the first ${parts.length} of ${all.length} parts were read`;
    const notes: string[] = [];
    for (const [index, part] of parts.entries()) {
      notes.push(
        await ask(part, `Part ${index + 1} of ${parts.length} of the document. Note its facts as bullet points.`),
      );
      calls += 1;
    }
    source = notes.join('\n');
  }
  const summary = clipSummary(
    await ask(
      source,
      text.length > callChars ? 'Notes taken from each part of the document. Summarise them as one.' : 'The document:',
    ),
  );
  calls += 1;
  if (!summary) return null;
  return {
    text: summary,
    source: modelSummarySource(model.key),
    detail: `written by the chat model ${model.key} (${calls} call${calls === 1 ? '' : 's'}${cut})`,
  };
}
