// Original file: proto/maka/broker/v1/broker.proto

import type { Register as _maka_broker_v1_Register, Register__Output as _maka_broker_v1_Register__Output } from '../../../maka/broker/v1/Register';
import type { ProviderHeartbeat as _maka_broker_v1_ProviderHeartbeat, ProviderHeartbeat__Output as _maka_broker_v1_ProviderHeartbeat__Output } from '../../../maka/broker/v1/ProviderHeartbeat';
import type { InvocationProgress as _maka_broker_v1_InvocationProgress, InvocationProgress__Output as _maka_broker_v1_InvocationProgress__Output } from '../../../maka/broker/v1/InvocationProgress';
import type { InteractionRequest as _maka_broker_v1_InteractionRequest, InteractionRequest__Output as _maka_broker_v1_InteractionRequest__Output } from '../../../maka/broker/v1/InteractionRequest';
import type { InvocationResult as _maka_broker_v1_InvocationResult, InvocationResult__Output as _maka_broker_v1_InvocationResult__Output } from '../../../maka/broker/v1/InvocationResult';
import type { InvocationFailure as _maka_broker_v1_InvocationFailure, InvocationFailure__Output as _maka_broker_v1_InvocationFailure__Output } from '../../../maka/broker/v1/InvocationFailure';
import type { ToolsChanged as _maka_broker_v1_ToolsChanged, ToolsChanged__Output as _maka_broker_v1_ToolsChanged__Output } from '../../../maka/broker/v1/ToolsChanged';
import type { InteractionReceived as _maka_broker_v1_InteractionReceived, InteractionReceived__Output as _maka_broker_v1_InteractionReceived__Output } from '../../../maka/broker/v1/InteractionReceived';
import type { SignInStatus as _maka_broker_v1_SignInStatus, SignInStatus__Output as _maka_broker_v1_SignInStatus__Output } from '../../../maka/broker/v1/SignInStatus';

export interface ConnectRequest {
  'register'?: (_maka_broker_v1_Register | null);
  'heartbeat'?: (_maka_broker_v1_ProviderHeartbeat | null);
  'progress'?: (_maka_broker_v1_InvocationProgress | null);
  'interaction_request'?: (_maka_broker_v1_InteractionRequest | null);
  'result'?: (_maka_broker_v1_InvocationResult | null);
  'failure'?: (_maka_broker_v1_InvocationFailure | null);
  'tools_changed'?: (_maka_broker_v1_ToolsChanged | null);
  'interaction_received'?: (_maka_broker_v1_InteractionReceived | null);
  'sign_in_status'?: (_maka_broker_v1_SignInStatus | null);
  'frame'?: "register"|"heartbeat"|"progress"|"interaction_request"|"result"|"failure"|"tools_changed"|"interaction_received"|"sign_in_status";
}

export interface ConnectRequest__Output {
  'register'?: (_maka_broker_v1_Register__Output | null);
  'heartbeat'?: (_maka_broker_v1_ProviderHeartbeat__Output | null);
  'progress'?: (_maka_broker_v1_InvocationProgress__Output | null);
  'interaction_request'?: (_maka_broker_v1_InteractionRequest__Output | null);
  'result'?: (_maka_broker_v1_InvocationResult__Output | null);
  'failure'?: (_maka_broker_v1_InvocationFailure__Output | null);
  'tools_changed'?: (_maka_broker_v1_ToolsChanged__Output | null);
  'interaction_received'?: (_maka_broker_v1_InteractionReceived__Output | null);
  'sign_in_status'?: (_maka_broker_v1_SignInStatus__Output | null);
  'frame'?: "register"|"heartbeat"|"progress"|"interaction_request"|"result"|"failure"|"tools_changed"|"interaction_received"|"sign_in_status";
}
