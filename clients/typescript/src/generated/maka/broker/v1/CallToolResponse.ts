// Original file: proto/maka/broker/v1/broker.proto

import type { CallAccepted as _maka_broker_v1_CallAccepted, CallAccepted__Output as _maka_broker_v1_CallAccepted__Output } from '../../../maka/broker/v1/CallAccepted';
import type { CallProgress as _maka_broker_v1_CallProgress, CallProgress__Output as _maka_broker_v1_CallProgress__Output } from '../../../maka/broker/v1/CallProgress';
import type { AwaitingInteraction as _maka_broker_v1_AwaitingInteraction, AwaitingInteraction__Output as _maka_broker_v1_AwaitingInteraction__Output } from '../../../maka/broker/v1/AwaitingInteraction';
import type { InteractionSettledEvent as _maka_broker_v1_InteractionSettledEvent, InteractionSettledEvent__Output as _maka_broker_v1_InteractionSettledEvent__Output } from '../../../maka/broker/v1/InteractionSettledEvent';
import type { CallResult as _maka_broker_v1_CallResult, CallResult__Output as _maka_broker_v1_CallResult__Output } from '../../../maka/broker/v1/CallResult';
import type { CallFailure as _maka_broker_v1_CallFailure, CallFailure__Output as _maka_broker_v1_CallFailure__Output } from '../../../maka/broker/v1/CallFailure';
import type { CallLost as _maka_broker_v1_CallLost, CallLost__Output as _maka_broker_v1_CallLost__Output } from '../../../maka/broker/v1/CallLost';
import type { CallStopped as _maka_broker_v1_CallStopped, CallStopped__Output as _maka_broker_v1_CallStopped__Output } from '../../../maka/broker/v1/CallStopped';
import type { CallStatus as _maka_broker_v1_CallStatus, CallStatus__Output as _maka_broker_v1_CallStatus__Output } from '../../../maka/broker/v1/CallStatus';
import type { Long } from '@grpc/proto-loader';

export interface CallToolResponse {
  'accepted'?: (_maka_broker_v1_CallAccepted | null);
  'progress'?: (_maka_broker_v1_CallProgress | null);
  'awaiting_interaction'?: (_maka_broker_v1_AwaitingInteraction | null);
  'interaction_settled'?: (_maka_broker_v1_InteractionSettledEvent | null);
  'result'?: (_maka_broker_v1_CallResult | null);
  'failure'?: (_maka_broker_v1_CallFailure | null);
  'lost'?: (_maka_broker_v1_CallLost | null);
  'stopped'?: (_maka_broker_v1_CallStopped | null);
  'status'?: (_maka_broker_v1_CallStatus | null);
  'sequence'?: (number | string | Long);
  'resume_token'?: (string);
  'event'?: "accepted"|"progress"|"awaiting_interaction"|"interaction_settled"|"result"|"failure"|"lost"|"stopped"|"status";
}

export interface CallToolResponse__Output {
  'accepted'?: (_maka_broker_v1_CallAccepted__Output | null);
  'progress'?: (_maka_broker_v1_CallProgress__Output | null);
  'awaiting_interaction'?: (_maka_broker_v1_AwaitingInteraction__Output | null);
  'interaction_settled'?: (_maka_broker_v1_InteractionSettledEvent__Output | null);
  'result'?: (_maka_broker_v1_CallResult__Output | null);
  'failure'?: (_maka_broker_v1_CallFailure__Output | null);
  'lost'?: (_maka_broker_v1_CallLost__Output | null);
  'stopped'?: (_maka_broker_v1_CallStopped__Output | null);
  'status'?: (_maka_broker_v1_CallStatus__Output | null);
  'sequence': (string);
  'resume_token': (string);
  'event'?: "accepted"|"progress"|"awaiting_interaction"|"interaction_settled"|"result"|"failure"|"lost"|"stopped"|"status";
}
