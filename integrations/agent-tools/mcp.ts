/**
 * MCP tools over JSON-RPC on HTTP (the streamable-HTTP transport): `initialize`, then `tools/list`
 * or `tools/call`, carrying the session id the server hands out. An answer may come as JSON or as
 * a one-message event stream. Every server an agent attaches is reached through this client.
 */
import { postJson, ToolFailure } from './http-json.js';
import { textOf } from '../../domain/shared/text.js';

export interface McpTool {
  name: string;
  description: string;
}

export interface McpClient {
  listTools(serverUrl: string, signal: AbortSignal): Promise<McpTool[]>;
  callTool(
    serverUrl: string,
    name: string,
    args: Record<string, unknown>,
    signal: AbortSignal,
  ): Promise<{ text: string; isError: boolean }>;
}

const protocolVersion = '2025-03-26';

async function rpc(
  url: string,
  method: string,
  params: unknown,
  session: string | null,
  signal: AbortSignal,
  timeoutSeconds: number,
  id: number,
) {
  const headers: Record<string, string> = session ? { 'mcp-session-id': session } : {};
  const { body, headers: answerHeaders } = await postJson(
    url,
    { jsonrpc: '2.0', id, method, params },
    { signal, timeoutSeconds, headers },
  );
  const message = body as { result?: unknown; error?: { message?: string } } | null;
  if (message?.error)
    throw new ToolFailure(`The MCP server refused ${method}: ${message.error.message ?? 'error'}`, false);
  return { result: message?.result, session: answerHeaders.get('mcp-session-id') ?? session };
}

async function session(url: string, signal: AbortSignal, timeoutSeconds: number): Promise<string | null> {
  const init = await rpc(
    url,
    'initialize',
    { protocolVersion, capabilities: {}, clientInfo: { name: 'saved-agent', version: '1' } },
    null,
    signal,
    timeoutSeconds,
    1,
  );
  // The initialized notification has no id and expects no answer.
  await postJson(
    url,
    { jsonrpc: '2.0', method: 'notifications/initialized' },
    { signal, timeoutSeconds, headers: init.session ? { 'mcp-session-id': init.session } : {} },
  );
  return init.session;
}

export function httpMcpClient(timeoutSeconds = 30): McpClient {
  return {
    async listTools(url, signal) {
      const id = await session(url, signal, timeoutSeconds);
      const { result } = await rpc(url, 'tools/list', {}, id, signal, timeoutSeconds, 2);
      const tools = (result as { tools?: { name?: unknown; description?: unknown }[] })?.tools ?? [];
      return tools.map((t) => ({ name: textOf(t.name), description: textOf(t.description) }));
    },
    async callTool(url, name, args, signal) {
      const id = await session(url, signal, timeoutSeconds);
      const { result } = await rpc(url, 'tools/call', { name, arguments: args }, id, signal, timeoutSeconds, 2);
      const content = (result as { content?: { type?: string; text?: string }[]; isError?: boolean }) ?? {};
      const text = (content.content ?? [])
        .filter((c) => c.type === 'text')
        .map((c) => c.text ?? '')
        .join('\n');
      return { text, isError: content.isError === true };
    },
  };
}
