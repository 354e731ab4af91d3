// Original file: proto/maka/form/v1/form.proto

export const Action = {
  ACTION_UNSPECIFIED: 'ACTION_UNSPECIFIED',
  ACTION_ACCEPT: 'ACTION_ACCEPT',
  ACTION_DECLINE: 'ACTION_DECLINE',
  ACTION_CANCEL: 'ACTION_CANCEL',
} as const;

export type Action =
  | 'ACTION_UNSPECIFIED'
  | 0
  | 'ACTION_ACCEPT'
  | 1
  | 'ACTION_DECLINE'
  | 2
  | 'ACTION_CANCEL'
  | 3

export type Action__Output = typeof Action[keyof typeof Action]
