// @ts-check
// Time left and round deadlines as text. Pure: the caller passes the server's clock.

/** @typedef {import("./state.js").Round} Round */

/**
 * @param {string | null} expiresAt
 * @param {number} nowMs the server's current time
 * @returns {{text: string, urgent: boolean, expired: boolean}}
 */
export function timeLeftText(expiresAt, nowMs) {
  if (!expiresAt) return { text: "no time limit", urgent: false, expired: false };
  const left = Date.parse(expiresAt) - nowMs;
  if (left <= 0) return { text: "time is up", urgent: true, expired: true };
  const seconds = Math.ceil(left / 1000);
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = seconds % 60;
  /** @param {number} n */
  const pad = (n) => String(n).padStart(2, "0");
  const text = h ? `${h}h ${pad(m)}m left` : m ? `${m}m ${pad(s)}s left` : `${s}s left`;
  return { text, urgent: seconds <= 60, expired: false };
}

/**
 * The form's one deadline as a countdown (the earlier of its own wait and its round's deadline), labelled when it
 * is the round's: "45s left", "45s left in this round".
 * @param {string | null} deadline
 * @param {boolean} isRound
 * @param {number} nowMs the server's current time
 * @returns {{text: string, urgent: boolean, expired: boolean}}
 */
export function deadlineText(deadline, isRound, nowMs) {
  const left = timeLeftText(deadline, nowMs);
  if (!isRound || !deadline || left.expired) return left;
  return { ...left, text: `${left.text} in this round` };
}

/**
 * "Form 1 of 2 · answer all forms of this round by 14:05:09": this form's place in its round and, when the
 * round's deadline is the form's effective one (`isRound`), that deadline (the server's requestState expires
 * then); a later round deadline is left out, since the form closes first. Empty for a form outside a round.
 * @param {Round | null} round
 * @param {number} skewMs server clock minus browser clock
 * @param {boolean} [isRound]
 */
export function roundText(round, skewMs, isRound = true) {
  if (!round || !round.size) return "";
  const parts = [];
  if (round.size > 1) parts.push(`Form ${round.position} of ${round.size}`);
  if (round.deadline && isRound) {
    const when = new Date(Date.parse(round.deadline) - skewMs);
    const all = round.size > 1 ? "all forms of this round" : "this form";
    parts.push(`answer ${all} by ${when.toLocaleTimeString()}`);
  }
  return parts.join(" · ");
}
