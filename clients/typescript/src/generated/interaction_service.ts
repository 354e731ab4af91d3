import type * as grpc from '@grpc/grpc-js';
import type { EnumTypeDefinition, MessageTypeDefinition } from '@grpc/proto-loader';

import type { Duration as _google_protobuf_Duration, Duration__Output as _google_protobuf_Duration__Output } from './google/protobuf/Duration';
import type { Timestamp as _google_protobuf_Timestamp, Timestamp__Output as _google_protobuf_Timestamp__Output } from './google/protobuf/Timestamp';
import type { Answer as _maka_form_v1_Answer, Answer__Output as _maka_form_v1_Answer__Output } from './maka/form/v1/Answer';
import type { BooleanField as _maka_form_v1_BooleanField, BooleanField__Output as _maka_form_v1_BooleanField__Output } from './maka/form/v1/BooleanField';
import type { Field as _maka_form_v1_Field, Field__Output as _maka_form_v1_Field__Output } from './maka/form/v1/Field';
import type { FieldViolation as _maka_form_v1_FieldViolation, FieldViolation__Output as _maka_form_v1_FieldViolation__Output } from './maka/form/v1/FieldViolation';
import type { Form as _maka_form_v1_Form, Form__Output as _maka_form_v1_Form__Output } from './maka/form/v1/Form';
import type { MultiSelectField as _maka_form_v1_MultiSelectField, MultiSelectField__Output as _maka_form_v1_MultiSelectField__Output } from './maka/form/v1/MultiSelectField';
import type { NumberField as _maka_form_v1_NumberField, NumberField__Output as _maka_form_v1_NumberField__Output } from './maka/form/v1/NumberField';
import type { Option as _maka_form_v1_Option, Option__Output as _maka_form_v1_Option__Output } from './maka/form/v1/Option';
import type { Requester as _maka_form_v1_Requester, Requester__Output as _maka_form_v1_Requester__Output } from './maka/form/v1/Requester';
import type { SingleSelectField as _maka_form_v1_SingleSelectField, SingleSelectField__Output as _maka_form_v1_SingleSelectField__Output } from './maka/form/v1/SingleSelectField';
import type { StringField as _maka_form_v1_StringField, StringField__Output as _maka_form_v1_StringField__Output } from './maka/form/v1/StringField';
import type { StringList as _maka_form_v1_StringList, StringList__Output as _maka_form_v1_StringList__Output } from './maka/form/v1/StringList';
import type { Value as _maka_form_v1_Value, Value__Output as _maka_form_v1_Value__Output } from './maka/form/v1/Value';
import type { AnswerOutcome as _maka_interaction_v1_AnswerOutcome, AnswerOutcome__Output as _maka_interaction_v1_AnswerOutcome__Output } from './maka/interaction/v1/AnswerOutcome';
import type { AnswerRequest as _maka_interaction_v1_AnswerRequest, AnswerRequest__Output as _maka_interaction_v1_AnswerRequest__Output } from './maka/interaction/v1/AnswerRequest';
import type { AnswerResponse as _maka_interaction_v1_AnswerResponse, AnswerResponse__Output as _maka_interaction_v1_AnswerResponse__Output } from './maka/interaction/v1/AnswerResponse';
import type { AnsweredBy as _maka_interaction_v1_AnsweredBy, AnsweredBy__Output as _maka_interaction_v1_AnsweredBy__Output } from './maka/interaction/v1/AnsweredBy';
import type { AttachRequest as _maka_interaction_v1_AttachRequest, AttachRequest__Output as _maka_interaction_v1_AttachRequest__Output } from './maka/interaction/v1/AttachRequest';
import type { AttachResponse as _maka_interaction_v1_AttachResponse, AttachResponse__Output as _maka_interaction_v1_AttachResponse__Output } from './maka/interaction/v1/AttachResponse';
import type { AttachedSurface as _maka_interaction_v1_AttachedSurface, AttachedSurface__Output as _maka_interaction_v1_AttachedSurface__Output } from './maka/interaction/v1/AttachedSurface';
import type { Binding as _maka_interaction_v1_Binding, Binding__Output as _maka_interaction_v1_Binding__Output } from './maka/interaction/v1/Binding';
import type { CloseInteraction as _maka_interaction_v1_CloseInteraction, CloseInteraction__Output as _maka_interaction_v1_CloseInteraction__Output } from './maka/interaction/v1/CloseInteraction';
import type { DeliveryRecorded as _maka_interaction_v1_DeliveryRecorded, DeliveryRecorded__Output as _maka_interaction_v1_DeliveryRecorded__Output } from './maka/interaction/v1/DeliveryRecorded';
import type { EpochBegun as _maka_interaction_v1_EpochBegun, EpochBegun__Output as _maka_interaction_v1_EpochBegun__Output } from './maka/interaction/v1/EpochBegun';
import type { Event as _maka_interaction_v1_Event, Event__Output as _maka_interaction_v1_Event__Output } from './maka/interaction/v1/Event';
import type { GetInteractionRequest as _maka_interaction_v1_GetInteractionRequest, GetInteractionRequest__Output as _maka_interaction_v1_GetInteractionRequest__Output } from './maka/interaction/v1/GetInteractionRequest';
import type { GetInteractionResponse as _maka_interaction_v1_GetInteractionResponse, GetInteractionResponse__Output as _maka_interaction_v1_GetInteractionResponse__Output } from './maka/interaction/v1/GetInteractionResponse';
import type { Heartbeat as _maka_interaction_v1_Heartbeat, Heartbeat__Output as _maka_interaction_v1_Heartbeat__Output } from './maka/interaction/v1/Heartbeat';
import type { HeartbeatAck as _maka_interaction_v1_HeartbeatAck, HeartbeatAck__Output as _maka_interaction_v1_HeartbeatAck__Output } from './maka/interaction/v1/HeartbeatAck';
import type { Hello as _maka_interaction_v1_Hello, Hello__Output as _maka_interaction_v1_Hello__Output } from './maka/interaction/v1/Hello';
import type { HistoryEntry as _maka_interaction_v1_HistoryEntry, HistoryEntry__Output as _maka_interaction_v1_HistoryEntry__Output } from './maka/interaction/v1/HistoryEntry';
import type { HostLinkRequest as _maka_interaction_v1_HostLinkRequest, HostLinkRequest__Output as _maka_interaction_v1_HostLinkRequest__Output } from './maka/interaction/v1/HostLinkRequest';
import type { HostLinkResponse as _maka_interaction_v1_HostLinkResponse, HostLinkResponse__Output as _maka_interaction_v1_HostLinkResponse__Output } from './maka/interaction/v1/HostLinkResponse';
import type { Interaction as _maka_interaction_v1_Interaction, Interaction__Output as _maka_interaction_v1_Interaction__Output } from './maka/interaction/v1/Interaction';
import type { InteractionClosed as _maka_interaction_v1_InteractionClosed, InteractionClosed__Output as _maka_interaction_v1_InteractionClosed__Output } from './maka/interaction/v1/InteractionClosed';
import type { InteractionEvent as _maka_interaction_v1_InteractionEvent, InteractionEvent__Output as _maka_interaction_v1_InteractionEvent__Output } from './maka/interaction/v1/InteractionEvent';
import type { InteractionOpened as _maka_interaction_v1_InteractionOpened, InteractionOpened__Output as _maka_interaction_v1_InteractionOpened__Output } from './maka/interaction/v1/InteractionOpened';
import type { InteractionServiceClient as _maka_interaction_v1_InteractionServiceClient, InteractionServiceDefinition as _maka_interaction_v1_InteractionServiceDefinition } from './maka/interaction/v1/InteractionService';
import type { InteractionSettled as _maka_interaction_v1_InteractionSettled, InteractionSettled__Output as _maka_interaction_v1_InteractionSettled__Output } from './maka/interaction/v1/InteractionSettled';
import type { ListHistoryRequest as _maka_interaction_v1_ListHistoryRequest, ListHistoryRequest__Output as _maka_interaction_v1_ListHistoryRequest__Output } from './maka/interaction/v1/ListHistoryRequest';
import type { ListHistoryResponse as _maka_interaction_v1_ListHistoryResponse, ListHistoryResponse__Output as _maka_interaction_v1_ListHistoryResponse__Output } from './maka/interaction/v1/ListHistoryResponse';
import type { ListHostsRequest as _maka_interaction_v1_ListHostsRequest, ListHostsRequest__Output as _maka_interaction_v1_ListHostsRequest__Output } from './maka/interaction/v1/ListHostsRequest';
import type { ListHostsResponse as _maka_interaction_v1_ListHostsResponse, ListHostsResponse__Output as _maka_interaction_v1_ListHostsResponse__Output } from './maka/interaction/v1/ListHostsResponse';
import type { ListPendingRequest as _maka_interaction_v1_ListPendingRequest, ListPendingRequest__Output as _maka_interaction_v1_ListPendingRequest__Output } from './maka/interaction/v1/ListPendingRequest';
import type { ListPendingResponse as _maka_interaction_v1_ListPendingResponse, ListPendingResponse__Output as _maka_interaction_v1_ListPendingResponse__Output } from './maka/interaction/v1/ListPendingResponse';
import type { ListSurfacesRequest as _maka_interaction_v1_ListSurfacesRequest, ListSurfacesRequest__Output as _maka_interaction_v1_ListSurfacesRequest__Output } from './maka/interaction/v1/ListSurfacesRequest';
import type { ListSurfacesResponse as _maka_interaction_v1_ListSurfacesResponse, ListSurfacesResponse__Output as _maka_interaction_v1_ListSurfacesResponse__Output } from './maka/interaction/v1/ListSurfacesResponse';
import type { OpenInteraction as _maka_interaction_v1_OpenInteraction, OpenInteraction__Output as _maka_interaction_v1_OpenInteraction__Output } from './maka/interaction/v1/OpenInteraction';
import type { OpenRejected as _maka_interaction_v1_OpenRejected, OpenRejected__Output as _maka_interaction_v1_OpenRejected__Output } from './maka/interaction/v1/OpenRejected';
import type { Person as _maka_interaction_v1_Person, Person__Output as _maka_interaction_v1_Person__Output } from './maka/interaction/v1/Person';
import type { ReportDelivery as _maka_interaction_v1_ReportDelivery, ReportDelivery__Output as _maka_interaction_v1_ReportDelivery__Output } from './maka/interaction/v1/ReportDelivery';
import type { Round as _maka_interaction_v1_Round, Round__Output as _maka_interaction_v1_Round__Output } from './maka/interaction/v1/Round';
import type { Snapshot as _maka_interaction_v1_Snapshot, Snapshot__Output as _maka_interaction_v1_Snapshot__Output } from './maka/interaction/v1/Snapshot';
import type { SubmitAnswer as _maka_interaction_v1_SubmitAnswer, SubmitAnswer__Output as _maka_interaction_v1_SubmitAnswer__Output } from './maka/interaction/v1/SubmitAnswer';
import type { Subscribe as _maka_interaction_v1_Subscribe, Subscribe__Output as _maka_interaction_v1_Subscribe__Output } from './maka/interaction/v1/Subscribe';

type SubtypeConstructor<Constructor extends new (...args: any) => any, Subtype> = {
  new(...args: ConstructorParameters<Constructor>): Subtype;
};

export interface ProtoGrpcType {
  google: {
    protobuf: {
      Duration: MessageTypeDefinition<_google_protobuf_Duration, _google_protobuf_Duration__Output>
      Timestamp: MessageTypeDefinition<_google_protobuf_Timestamp, _google_protobuf_Timestamp__Output>
    }
  }
  maka: {
    form: {
      v1: {
        Action: EnumTypeDefinition
        Answer: MessageTypeDefinition<_maka_form_v1_Answer, _maka_form_v1_Answer__Output>
        BooleanField: MessageTypeDefinition<_maka_form_v1_BooleanField, _maka_form_v1_BooleanField__Output>
        Field: MessageTypeDefinition<_maka_form_v1_Field, _maka_form_v1_Field__Output>
        FieldViolation: MessageTypeDefinition<_maka_form_v1_FieldViolation, _maka_form_v1_FieldViolation__Output>
        Form: MessageTypeDefinition<_maka_form_v1_Form, _maka_form_v1_Form__Output>
        FormErrorReason: EnumTypeDefinition
        MultiSelectField: MessageTypeDefinition<_maka_form_v1_MultiSelectField, _maka_form_v1_MultiSelectField__Output>
        NumberField: MessageTypeDefinition<_maka_form_v1_NumberField, _maka_form_v1_NumberField__Output>
        Option: MessageTypeDefinition<_maka_form_v1_Option, _maka_form_v1_Option__Output>
        Requester: MessageTypeDefinition<_maka_form_v1_Requester, _maka_form_v1_Requester__Output>
        SingleSelectField: MessageTypeDefinition<_maka_form_v1_SingleSelectField, _maka_form_v1_SingleSelectField__Output>
        StringField: MessageTypeDefinition<_maka_form_v1_StringField, _maka_form_v1_StringField__Output>
        StringFormat: EnumTypeDefinition
        StringList: MessageTypeDefinition<_maka_form_v1_StringList, _maka_form_v1_StringList__Output>
        Value: MessageTypeDefinition<_maka_form_v1_Value, _maka_form_v1_Value__Output>
      }
    }
    interaction: {
      v1: {
        AnswerOutcome: MessageTypeDefinition<_maka_interaction_v1_AnswerOutcome, _maka_interaction_v1_AnswerOutcome__Output>
        AnswerRequest: MessageTypeDefinition<_maka_interaction_v1_AnswerRequest, _maka_interaction_v1_AnswerRequest__Output>
        AnswerResponse: MessageTypeDefinition<_maka_interaction_v1_AnswerResponse, _maka_interaction_v1_AnswerResponse__Output>
        AnsweredBy: MessageTypeDefinition<_maka_interaction_v1_AnsweredBy, _maka_interaction_v1_AnsweredBy__Output>
        AttachRequest: MessageTypeDefinition<_maka_interaction_v1_AttachRequest, _maka_interaction_v1_AttachRequest__Output>
        AttachResponse: MessageTypeDefinition<_maka_interaction_v1_AttachResponse, _maka_interaction_v1_AttachResponse__Output>
        AttachedSurface: MessageTypeDefinition<_maka_interaction_v1_AttachedSurface, _maka_interaction_v1_AttachedSurface__Output>
        Binding: MessageTypeDefinition<_maka_interaction_v1_Binding, _maka_interaction_v1_Binding__Output>
        CloseInteraction: MessageTypeDefinition<_maka_interaction_v1_CloseInteraction, _maka_interaction_v1_CloseInteraction__Output>
        CloseReason: EnumTypeDefinition
        DeliveryRecorded: MessageTypeDefinition<_maka_interaction_v1_DeliveryRecorded, _maka_interaction_v1_DeliveryRecorded__Output>
        DeliveryState: EnumTypeDefinition
        EpochBegun: MessageTypeDefinition<_maka_interaction_v1_EpochBegun, _maka_interaction_v1_EpochBegun__Output>
        ErrorReason: EnumTypeDefinition
        Event: MessageTypeDefinition<_maka_interaction_v1_Event, _maka_interaction_v1_Event__Output>
        EventKind: EnumTypeDefinition
        GetInteractionRequest: MessageTypeDefinition<_maka_interaction_v1_GetInteractionRequest, _maka_interaction_v1_GetInteractionRequest__Output>
        GetInteractionResponse: MessageTypeDefinition<_maka_interaction_v1_GetInteractionResponse, _maka_interaction_v1_GetInteractionResponse__Output>
        Heartbeat: MessageTypeDefinition<_maka_interaction_v1_Heartbeat, _maka_interaction_v1_Heartbeat__Output>
        HeartbeatAck: MessageTypeDefinition<_maka_interaction_v1_HeartbeatAck, _maka_interaction_v1_HeartbeatAck__Output>
        Hello: MessageTypeDefinition<_maka_interaction_v1_Hello, _maka_interaction_v1_Hello__Output>
        HistoryEntry: MessageTypeDefinition<_maka_interaction_v1_HistoryEntry, _maka_interaction_v1_HistoryEntry__Output>
        HostLinkRequest: MessageTypeDefinition<_maka_interaction_v1_HostLinkRequest, _maka_interaction_v1_HostLinkRequest__Output>
        HostLinkResponse: MessageTypeDefinition<_maka_interaction_v1_HostLinkResponse, _maka_interaction_v1_HostLinkResponse__Output>
        Interaction: MessageTypeDefinition<_maka_interaction_v1_Interaction, _maka_interaction_v1_Interaction__Output>
        InteractionClosed: MessageTypeDefinition<_maka_interaction_v1_InteractionClosed, _maka_interaction_v1_InteractionClosed__Output>
        InteractionEvent: MessageTypeDefinition<_maka_interaction_v1_InteractionEvent, _maka_interaction_v1_InteractionEvent__Output>
        InteractionOpened: MessageTypeDefinition<_maka_interaction_v1_InteractionOpened, _maka_interaction_v1_InteractionOpened__Output>
        InteractionService: SubtypeConstructor<typeof grpc.Client, _maka_interaction_v1_InteractionServiceClient> & { service: _maka_interaction_v1_InteractionServiceDefinition }
        InteractionSettled: MessageTypeDefinition<_maka_interaction_v1_InteractionSettled, _maka_interaction_v1_InteractionSettled__Output>
        InteractionState: EnumTypeDefinition
        ListHistoryRequest: MessageTypeDefinition<_maka_interaction_v1_ListHistoryRequest, _maka_interaction_v1_ListHistoryRequest__Output>
        ListHistoryResponse: MessageTypeDefinition<_maka_interaction_v1_ListHistoryResponse, _maka_interaction_v1_ListHistoryResponse__Output>
        ListHostsRequest: MessageTypeDefinition<_maka_interaction_v1_ListHostsRequest, _maka_interaction_v1_ListHostsRequest__Output>
        ListHostsResponse: MessageTypeDefinition<_maka_interaction_v1_ListHostsResponse, _maka_interaction_v1_ListHostsResponse__Output>
        ListPendingRequest: MessageTypeDefinition<_maka_interaction_v1_ListPendingRequest, _maka_interaction_v1_ListPendingRequest__Output>
        ListPendingResponse: MessageTypeDefinition<_maka_interaction_v1_ListPendingResponse, _maka_interaction_v1_ListPendingResponse__Output>
        ListSurfacesRequest: MessageTypeDefinition<_maka_interaction_v1_ListSurfacesRequest, _maka_interaction_v1_ListSurfacesRequest__Output>
        ListSurfacesResponse: MessageTypeDefinition<_maka_interaction_v1_ListSurfacesResponse, _maka_interaction_v1_ListSurfacesResponse__Output>
        OpenInteraction: MessageTypeDefinition<_maka_interaction_v1_OpenInteraction, _maka_interaction_v1_OpenInteraction__Output>
        OpenRejected: MessageTypeDefinition<_maka_interaction_v1_OpenRejected, _maka_interaction_v1_OpenRejected__Output>
        Person: MessageTypeDefinition<_maka_interaction_v1_Person, _maka_interaction_v1_Person__Output>
        PrincipalKind: EnumTypeDefinition
        ReportDelivery: MessageTypeDefinition<_maka_interaction_v1_ReportDelivery, _maka_interaction_v1_ReportDelivery__Output>
        Round: MessageTypeDefinition<_maka_interaction_v1_Round, _maka_interaction_v1_Round__Output>
        Snapshot: MessageTypeDefinition<_maka_interaction_v1_Snapshot, _maka_interaction_v1_Snapshot__Output>
        SubmitAnswer: MessageTypeDefinition<_maka_interaction_v1_SubmitAnswer, _maka_interaction_v1_SubmitAnswer__Output>
        Subscribe: MessageTypeDefinition<_maka_interaction_v1_Subscribe, _maka_interaction_v1_Subscribe__Output>
      }
    }
  }
}

