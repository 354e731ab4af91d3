// Original file: proto/maka/broker/v1/broker.proto

import type { Registered as _maka_broker_v1_Registered, Registered__Output as _maka_broker_v1_Registered__Output } from '../../../maka/broker/v1/Registered';
import type { Invoke as _maka_broker_v1_Invoke, Invoke__Output as _maka_broker_v1_Invoke__Output } from '../../../maka/broker/v1/Invoke';
import type { InteractionResult as _maka_broker_v1_InteractionResult, InteractionResult__Output as _maka_broker_v1_InteractionResult__Output } from '../../../maka/broker/v1/InteractionResult';
import type { CancelInvocation as _maka_broker_v1_CancelInvocation, CancelInvocation__Output as _maka_broker_v1_CancelInvocation__Output } from '../../../maka/broker/v1/CancelInvocation';
import type { FrameRejected as _maka_broker_v1_FrameRejected, FrameRejected__Output as _maka_broker_v1_FrameRejected__Output } from '../../../maka/broker/v1/FrameRejected';
import type { SignInCallback as _maka_broker_v1_SignInCallback, SignInCallback__Output as _maka_broker_v1_SignInCallback__Output } from '../../../maka/broker/v1/SignInCallback';
import type { SignOutRequest as _maka_broker_v1_SignOutRequest, SignOutRequest__Output as _maka_broker_v1_SignOutRequest__Output } from '../../../maka/broker/v1/SignOutRequest';

export interface ConnectResponse {
  'registered'?: (_maka_broker_v1_Registered | null);
  'invoke'?: (_maka_broker_v1_Invoke | null);
  'interaction_result'?: (_maka_broker_v1_InteractionResult | null);
  'cancel'?: (_maka_broker_v1_CancelInvocation | null);
  'rejected'?: (_maka_broker_v1_FrameRejected | null);
  'sign_in_callback'?: (_maka_broker_v1_SignInCallback | null);
  'sign_out'?: (_maka_broker_v1_SignOutRequest | null);
  'frame'?: "registered"|"invoke"|"interaction_result"|"cancel"|"rejected"|"sign_in_callback"|"sign_out";
}

export interface ConnectResponse__Output {
  'registered'?: (_maka_broker_v1_Registered__Output | null);
  'invoke'?: (_maka_broker_v1_Invoke__Output | null);
  'interaction_result'?: (_maka_broker_v1_InteractionResult__Output | null);
  'cancel'?: (_maka_broker_v1_CancelInvocation__Output | null);
  'rejected'?: (_maka_broker_v1_FrameRejected__Output | null);
  'sign_in_callback'?: (_maka_broker_v1_SignInCallback__Output | null);
  'sign_out'?: (_maka_broker_v1_SignOutRequest__Output | null);
  'frame'?: "registered"|"invoke"|"interaction_result"|"cancel"|"rejected"|"sign_in_callback"|"sign_out";
}
