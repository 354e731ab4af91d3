// Original file: proto/maka/interaction/v1/interaction_service.proto

import type { Snapshot as _maka_interaction_v1_Snapshot, Snapshot__Output as _maka_interaction_v1_Snapshot__Output } from '../../../maka/interaction/v1/Snapshot';
import type { Event as _maka_interaction_v1_Event, Event__Output as _maka_interaction_v1_Event__Output } from '../../../maka/interaction/v1/Event';
import type { AnswerOutcome as _maka_interaction_v1_AnswerOutcome, AnswerOutcome__Output as _maka_interaction_v1_AnswerOutcome__Output } from '../../../maka/interaction/v1/AnswerOutcome';

export interface AttachResponse {
  'snapshot'?: (_maka_interaction_v1_Snapshot | null);
  'event'?: (_maka_interaction_v1_Event | null);
  'answer_outcome'?: (_maka_interaction_v1_AnswerOutcome | null);
  'frame'?: "snapshot"|"event"|"answer_outcome";
}

export interface AttachResponse__Output {
  'snapshot'?: (_maka_interaction_v1_Snapshot__Output | null);
  'event'?: (_maka_interaction_v1_Event__Output | null);
  'answer_outcome'?: (_maka_interaction_v1_AnswerOutcome__Output | null);
  'frame'?: "snapshot"|"event"|"answer_outcome";
}
