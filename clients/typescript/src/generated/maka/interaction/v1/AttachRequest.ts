// Original file: proto/maka/interaction/v1/interaction_service.proto

import type { Subscribe as _maka_interaction_v1_Subscribe, Subscribe__Output as _maka_interaction_v1_Subscribe__Output } from '../../../maka/interaction/v1/Subscribe';
import type { SubmitAnswer as _maka_interaction_v1_SubmitAnswer, SubmitAnswer__Output as _maka_interaction_v1_SubmitAnswer__Output } from '../../../maka/interaction/v1/SubmitAnswer';

export interface AttachRequest {
  'subscribe'?: (_maka_interaction_v1_Subscribe | null);
  'answer'?: (_maka_interaction_v1_SubmitAnswer | null);
  'frame'?: "subscribe"|"answer";
}

export interface AttachRequest__Output {
  'subscribe'?: (_maka_interaction_v1_Subscribe__Output | null);
  'answer'?: (_maka_interaction_v1_SubmitAnswer__Output | null);
  'frame'?: "subscribe"|"answer";
}
