// Original file: proto/maka/broker/v1/broker.proto

export const SignInState = {
  SIGN_IN_STATE_UNSPECIFIED: 'SIGN_IN_STATE_UNSPECIFIED',
  SIGN_IN_STATE_REQUIRED: 'SIGN_IN_STATE_REQUIRED',
  SIGN_IN_STATE_SIGNED_IN: 'SIGN_IN_STATE_SIGNED_IN',
} as const;

export type SignInState =
  | 'SIGN_IN_STATE_UNSPECIFIED'
  | 0
  | 'SIGN_IN_STATE_REQUIRED'
  | 1
  | 'SIGN_IN_STATE_SIGNED_IN'
  | 2

export type SignInState__Output = typeof SignInState[keyof typeof SignInState]
