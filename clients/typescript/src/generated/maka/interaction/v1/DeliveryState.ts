// Original file: proto/maka/interaction/v1/interaction.proto

export const DeliveryState = {
  DELIVERY_STATE_UNSPECIFIED: 'DELIVERY_STATE_UNSPECIFIED',
  DELIVERY_STATE_PENDING: 'DELIVERY_STATE_PENDING',
  DELIVERY_STATE_DELIVERED: 'DELIVERY_STATE_DELIVERED',
  DELIVERY_STATE_LOST: 'DELIVERY_STATE_LOST',
} as const;

export type DeliveryState =
  | 'DELIVERY_STATE_UNSPECIFIED'
  | 0
  | 'DELIVERY_STATE_PENDING'
  | 1
  | 'DELIVERY_STATE_DELIVERED'
  | 2
  | 'DELIVERY_STATE_LOST'
  | 3

export type DeliveryState__Output = typeof DeliveryState[keyof typeof DeliveryState]
