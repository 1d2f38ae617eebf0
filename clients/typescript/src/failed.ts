/** The model-visible answer when an adapter could not do its part (same shape as the server's failures). */
export function failed(tool: string, code: string, message: string): string {
  return JSON.stringify({ ok: false, error: code, tool, message });
}
