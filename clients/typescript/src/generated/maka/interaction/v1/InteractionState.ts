// Original file: proto/maka/interaction/v1/interaction.proto

export const InteractionState = {
  INTERACTION_STATE_UNSPECIFIED: 'INTERACTION_STATE_UNSPECIFIED',
  INTERACTION_STATE_PENDING: 'INTERACTION_STATE_PENDING',
  INTERACTION_STATE_ANSWERED: 'INTERACTION_STATE_ANSWERED',
  INTERACTION_STATE_CLOSED: 'INTERACTION_STATE_CLOSED',
} as const;

export type InteractionState =
  | 'INTERACTION_STATE_UNSPECIFIED'
  | 0
  | 'INTERACTION_STATE_PENDING'
  | 1
  | 'INTERACTION_STATE_ANSWERED'
  | 2
  | 'INTERACTION_STATE_CLOSED'
  | 3

export type InteractionState__Output = typeof InteractionState[keyof typeof InteractionState]
