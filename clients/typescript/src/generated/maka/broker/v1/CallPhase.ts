// Original file: proto/maka/broker/v1/broker.proto

export const CallPhase = {
  CALL_PHASE_UNSPECIFIED: 'CALL_PHASE_UNSPECIFIED',
  CALL_PHASE_RUNNING: 'CALL_PHASE_RUNNING',
  CALL_PHASE_AWAITING_INTERACTION: 'CALL_PHASE_AWAITING_INTERACTION',
} as const;

export type CallPhase =
  | 'CALL_PHASE_UNSPECIFIED'
  | 0
  | 'CALL_PHASE_RUNNING'
  | 1
  | 'CALL_PHASE_AWAITING_INTERACTION'
  | 2

export type CallPhase__Output = typeof CallPhase[keyof typeof CallPhase]
