/**
 * What a person approves must be what the agent runs: a permission request's tool input
 * is stored whole, up to MOORING_PERMISSION_INPUT_MAX_BYTES, and streamed as a preview that says
 * it is one (`truncated`, `inputBytes`), its whole input the event's payload. An input above the
 * bound is never offered for approval at all: the gateway denies it unasked.
 */
import type { PermissionRow } from "../sql/permission.js";
import { preview, toText } from "../stream/preview.js";

type ToolCall = PermissionRow["toolCall"];

/** UTF-8 bytes of the input's text form (what the bound and the preview count). */
export const inputBytesOf = (input: unknown): number => Buffer.byteLength(toText(input));

/** The tool call as streamed and shown in task snapshots: its input cut to a preview when large. */
export function previewToolCall(toolCall: ToolCall): ToolCall {
  // A row written before inputs were stored whole already holds its preview.
  if (toolCall.truncated) return toolCall;
  const cut = preview(toolCall.input);
  if (!cut.truncated) return toolCall;
  return { ...toolCall, input: cut.preview, inputBytes: cut.bytes, truncated: true };
}

/** Reason code of the gateway's own refusal (`permission.resolved` `reason`). */
export const INPUT_TOO_LARGE = "input_too_large";

/** The refusal's message: to the agent (a deny's reason) and to whoever reads the request. */
export function tooLargeMessage(bytes: number, max: number): string {
  return (
    `The tool's input is ${bytes} bytes, more than the ${max} bytes a person is shown for approval ` +
    "(MOORING_PERMISSION_INPUT_MAX_BYTES), so the gateway denied it without asking."
  );
}
