// Original file: proto/maka/interaction/v1/interaction.proto

export const EventKind = {
  EVENT_KIND_UNSPECIFIED: 'EVENT_KIND_UNSPECIFIED',
  EVENT_KIND_OPENED: 'EVENT_KIND_OPENED',
  EVENT_KIND_ANSWERED: 'EVENT_KIND_ANSWERED',
  EVENT_KIND_CLOSED: 'EVENT_KIND_CLOSED',
  EVENT_KIND_DELIVERY: 'EVENT_KIND_DELIVERY',
} as const;

export type EventKind =
  | 'EVENT_KIND_UNSPECIFIED'
  | 0
  | 'EVENT_KIND_OPENED'
  | 1
  | 'EVENT_KIND_ANSWERED'
  | 2
  | 'EVENT_KIND_CLOSED'
  | 3
  | 'EVENT_KIND_DELIVERY'
  | 4

export type EventKind__Output = typeof EventKind[keyof typeof EventKind]
