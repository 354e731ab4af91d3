import type * as grpc from '@grpc/grpc-js';
import type { EnumTypeDefinition, MessageTypeDefinition } from '@grpc/proto-loader';

import type { Duration as _google_protobuf_Duration, Duration__Output as _google_protobuf_Duration__Output } from './google/protobuf/Duration';
import type { Timestamp as _google_protobuf_Timestamp, Timestamp__Output as _google_protobuf_Timestamp__Output } from './google/protobuf/Timestamp';
import type { AwaitingInteraction as _maka_broker_v1_AwaitingInteraction, AwaitingInteraction__Output as _maka_broker_v1_AwaitingInteraction__Output } from './maka/broker/v1/AwaitingInteraction';
import type { CallAccepted as _maka_broker_v1_CallAccepted, CallAccepted__Output as _maka_broker_v1_CallAccepted__Output } from './maka/broker/v1/CallAccepted';
import type { CallFailure as _maka_broker_v1_CallFailure, CallFailure__Output as _maka_broker_v1_CallFailure__Output } from './maka/broker/v1/CallFailure';
import type { CallLost as _maka_broker_v1_CallLost, CallLost__Output as _maka_broker_v1_CallLost__Output } from './maka/broker/v1/CallLost';
import type { CallProgress as _maka_broker_v1_CallProgress, CallProgress__Output as _maka_broker_v1_CallProgress__Output } from './maka/broker/v1/CallProgress';
import type { CallResult as _maka_broker_v1_CallResult, CallResult__Output as _maka_broker_v1_CallResult__Output } from './maka/broker/v1/CallResult';
import type { CallStatus as _maka_broker_v1_CallStatus, CallStatus__Output as _maka_broker_v1_CallStatus__Output } from './maka/broker/v1/CallStatus';
import type { CallStopped as _maka_broker_v1_CallStopped, CallStopped__Output as _maka_broker_v1_CallStopped__Output } from './maka/broker/v1/CallStopped';
import type { CallSummary as _maka_broker_v1_CallSummary, CallSummary__Output as _maka_broker_v1_CallSummary__Output } from './maka/broker/v1/CallSummary';
import type { CallToolRequest as _maka_broker_v1_CallToolRequest, CallToolRequest__Output as _maka_broker_v1_CallToolRequest__Output } from './maka/broker/v1/CallToolRequest';
import type { CallToolResponse as _maka_broker_v1_CallToolResponse, CallToolResponse__Output as _maka_broker_v1_CallToolResponse__Output } from './maka/broker/v1/CallToolResponse';
import type { CancelInvocation as _maka_broker_v1_CancelInvocation, CancelInvocation__Output as _maka_broker_v1_CancelInvocation__Output } from './maka/broker/v1/CancelInvocation';
import type { CapabilityBrokerServiceClient as _maka_broker_v1_CapabilityBrokerServiceClient, CapabilityBrokerServiceDefinition as _maka_broker_v1_CapabilityBrokerServiceDefinition } from './maka/broker/v1/CapabilityBrokerService';
import type { CompleteSignInRequest as _maka_broker_v1_CompleteSignInRequest, CompleteSignInRequest__Output as _maka_broker_v1_CompleteSignInRequest__Output } from './maka/broker/v1/CompleteSignInRequest';
import type { CompleteSignInResponse as _maka_broker_v1_CompleteSignInResponse, CompleteSignInResponse__Output as _maka_broker_v1_CompleteSignInResponse__Output } from './maka/broker/v1/CompleteSignInResponse';
import type { ConnectRequest as _maka_broker_v1_ConnectRequest, ConnectRequest__Output as _maka_broker_v1_ConnectRequest__Output } from './maka/broker/v1/ConnectRequest';
import type { ConnectResponse as _maka_broker_v1_ConnectResponse, ConnectResponse__Output as _maka_broker_v1_ConnectResponse__Output } from './maka/broker/v1/ConnectResponse';
import type { FrameRejected as _maka_broker_v1_FrameRejected, FrameRejected__Output as _maka_broker_v1_FrameRejected__Output } from './maka/broker/v1/FrameRejected';
import type { GetStatusRequest as _maka_broker_v1_GetStatusRequest, GetStatusRequest__Output as _maka_broker_v1_GetStatusRequest__Output } from './maka/broker/v1/GetStatusRequest';
import type { GetStatusResponse as _maka_broker_v1_GetStatusResponse, GetStatusResponse__Output as _maka_broker_v1_GetStatusResponse__Output } from './maka/broker/v1/GetStatusResponse';
import type { InteractionReceived as _maka_broker_v1_InteractionReceived, InteractionReceived__Output as _maka_broker_v1_InteractionReceived__Output } from './maka/broker/v1/InteractionReceived';
import type { InteractionRequest as _maka_broker_v1_InteractionRequest, InteractionRequest__Output as _maka_broker_v1_InteractionRequest__Output } from './maka/broker/v1/InteractionRequest';
import type { InteractionResult as _maka_broker_v1_InteractionResult, InteractionResult__Output as _maka_broker_v1_InteractionResult__Output } from './maka/broker/v1/InteractionResult';
import type { InteractionSettledEvent as _maka_broker_v1_InteractionSettledEvent, InteractionSettledEvent__Output as _maka_broker_v1_InteractionSettledEvent__Output } from './maka/broker/v1/InteractionSettledEvent';
import type { InvocationFailure as _maka_broker_v1_InvocationFailure, InvocationFailure__Output as _maka_broker_v1_InvocationFailure__Output } from './maka/broker/v1/InvocationFailure';
import type { InvocationProgress as _maka_broker_v1_InvocationProgress, InvocationProgress__Output as _maka_broker_v1_InvocationProgress__Output } from './maka/broker/v1/InvocationProgress';
import type { InvocationResult as _maka_broker_v1_InvocationResult, InvocationResult__Output as _maka_broker_v1_InvocationResult__Output } from './maka/broker/v1/InvocationResult';
import type { Invoke as _maka_broker_v1_Invoke, Invoke__Output as _maka_broker_v1_Invoke__Output } from './maka/broker/v1/Invoke';
import type { ListSignInsRequest as _maka_broker_v1_ListSignInsRequest, ListSignInsRequest__Output as _maka_broker_v1_ListSignInsRequest__Output } from './maka/broker/v1/ListSignInsRequest';
import type { ListSignInsResponse as _maka_broker_v1_ListSignInsResponse, ListSignInsResponse__Output as _maka_broker_v1_ListSignInsResponse__Output } from './maka/broker/v1/ListSignInsResponse';
import type { ListToolsRequest as _maka_broker_v1_ListToolsRequest, ListToolsRequest__Output as _maka_broker_v1_ListToolsRequest__Output } from './maka/broker/v1/ListToolsRequest';
import type { ListToolsResponse as _maka_broker_v1_ListToolsResponse, ListToolsResponse__Output as _maka_broker_v1_ListToolsResponse__Output } from './maka/broker/v1/ListToolsResponse';
import type { ProviderHeartbeat as _maka_broker_v1_ProviderHeartbeat, ProviderHeartbeat__Output as _maka_broker_v1_ProviderHeartbeat__Output } from './maka/broker/v1/ProviderHeartbeat';
import type { Register as _maka_broker_v1_Register, Register__Output as _maka_broker_v1_Register__Output } from './maka/broker/v1/Register';
import type { Registered as _maka_broker_v1_Registered, Registered__Output as _maka_broker_v1_Registered__Output } from './maka/broker/v1/Registered';
import type { ReportServersRequest as _maka_broker_v1_ReportServersRequest, ReportServersRequest__Output as _maka_broker_v1_ReportServersRequest__Output } from './maka/broker/v1/ReportServersRequest';
import type { ReportServersResponse as _maka_broker_v1_ReportServersResponse, ReportServersResponse__Output as _maka_broker_v1_ReportServersResponse__Output } from './maka/broker/v1/ReportServersResponse';
import type { ReporterStatus as _maka_broker_v1_ReporterStatus, ReporterStatus__Output as _maka_broker_v1_ReporterStatus__Output } from './maka/broker/v1/ReporterStatus';
import type { ServerError as _maka_broker_v1_ServerError, ServerError__Output as _maka_broker_v1_ServerError__Output } from './maka/broker/v1/ServerError';
import type { ServerStatus as _maka_broker_v1_ServerStatus, ServerStatus__Output as _maka_broker_v1_ServerStatus__Output } from './maka/broker/v1/ServerStatus';
import type { SignInCallback as _maka_broker_v1_SignInCallback, SignInCallback__Output as _maka_broker_v1_SignInCallback__Output } from './maka/broker/v1/SignInCallback';
import type { SignInStatus as _maka_broker_v1_SignInStatus, SignInStatus__Output as _maka_broker_v1_SignInStatus__Output } from './maka/broker/v1/SignInStatus';
import type { SignOutRequest as _maka_broker_v1_SignOutRequest, SignOutRequest__Output as _maka_broker_v1_SignOutRequest__Output } from './maka/broker/v1/SignOutRequest';
import type { SignOutResponse as _maka_broker_v1_SignOutResponse, SignOutResponse__Output as _maka_broker_v1_SignOutResponse__Output } from './maka/broker/v1/SignOutResponse';
import type { StopRequest as _maka_broker_v1_StopRequest, StopRequest__Output as _maka_broker_v1_StopRequest__Output } from './maka/broker/v1/StopRequest';
import type { StopResponse as _maka_broker_v1_StopResponse, StopResponse__Output as _maka_broker_v1_StopResponse__Output } from './maka/broker/v1/StopResponse';
import type { Tool as _maka_broker_v1_Tool, Tool__Output as _maka_broker_v1_Tool__Output } from './maka/broker/v1/Tool';
import type { ToolDescriptor as _maka_broker_v1_ToolDescriptor, ToolDescriptor__Output as _maka_broker_v1_ToolDescriptor__Output } from './maka/broker/v1/ToolDescriptor';
import type { ToolsChanged as _maka_broker_v1_ToolsChanged, ToolsChanged__Output as _maka_broker_v1_ToolsChanged__Output } from './maka/broker/v1/ToolsChanged';
import type { WatchCallRequest as _maka_broker_v1_WatchCallRequest, WatchCallRequest__Output as _maka_broker_v1_WatchCallRequest__Output } from './maka/broker/v1/WatchCallRequest';
import type { WatchCallResponse as _maka_broker_v1_WatchCallResponse, WatchCallResponse__Output as _maka_broker_v1_WatchCallResponse__Output } from './maka/broker/v1/WatchCallResponse';
import type { WatchToolsRequest as _maka_broker_v1_WatchToolsRequest, WatchToolsRequest__Output as _maka_broker_v1_WatchToolsRequest__Output } from './maka/broker/v1/WatchToolsRequest';
import type { WatchToolsResponse as _maka_broker_v1_WatchToolsResponse, WatchToolsResponse__Output as _maka_broker_v1_WatchToolsResponse__Output } from './maka/broker/v1/WatchToolsResponse';
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
import type { AnsweredBy as _maka_interaction_v1_AnsweredBy, AnsweredBy__Output as _maka_interaction_v1_AnsweredBy__Output } from './maka/interaction/v1/AnsweredBy';
import type { Binding as _maka_interaction_v1_Binding, Binding__Output as _maka_interaction_v1_Binding__Output } from './maka/interaction/v1/Binding';
import type { Interaction as _maka_interaction_v1_Interaction, Interaction__Output as _maka_interaction_v1_Interaction__Output } from './maka/interaction/v1/Interaction';
import type { InteractionEvent as _maka_interaction_v1_InteractionEvent, InteractionEvent__Output as _maka_interaction_v1_InteractionEvent__Output } from './maka/interaction/v1/InteractionEvent';
import type { Person as _maka_interaction_v1_Person, Person__Output as _maka_interaction_v1_Person__Output } from './maka/interaction/v1/Person';
import type { Round as _maka_interaction_v1_Round, Round__Output as _maka_interaction_v1_Round__Output } from './maka/interaction/v1/Round';

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
    broker: {
      v1: {
        AwaitingInteraction: MessageTypeDefinition<_maka_broker_v1_AwaitingInteraction, _maka_broker_v1_AwaitingInteraction__Output>
        CallAccepted: MessageTypeDefinition<_maka_broker_v1_CallAccepted, _maka_broker_v1_CallAccepted__Output>
        CallFailure: MessageTypeDefinition<_maka_broker_v1_CallFailure, _maka_broker_v1_CallFailure__Output>
        CallLost: MessageTypeDefinition<_maka_broker_v1_CallLost, _maka_broker_v1_CallLost__Output>
        CallPhase: EnumTypeDefinition
        CallProgress: MessageTypeDefinition<_maka_broker_v1_CallProgress, _maka_broker_v1_CallProgress__Output>
        CallResult: MessageTypeDefinition<_maka_broker_v1_CallResult, _maka_broker_v1_CallResult__Output>
        CallStatus: MessageTypeDefinition<_maka_broker_v1_CallStatus, _maka_broker_v1_CallStatus__Output>
        CallStopped: MessageTypeDefinition<_maka_broker_v1_CallStopped, _maka_broker_v1_CallStopped__Output>
        CallSummary: MessageTypeDefinition<_maka_broker_v1_CallSummary, _maka_broker_v1_CallSummary__Output>
        CallToolRequest: MessageTypeDefinition<_maka_broker_v1_CallToolRequest, _maka_broker_v1_CallToolRequest__Output>
        CallToolResponse: MessageTypeDefinition<_maka_broker_v1_CallToolResponse, _maka_broker_v1_CallToolResponse__Output>
        CancelInvocation: MessageTypeDefinition<_maka_broker_v1_CancelInvocation, _maka_broker_v1_CancelInvocation__Output>
        CapabilityBrokerService: SubtypeConstructor<typeof grpc.Client, _maka_broker_v1_CapabilityBrokerServiceClient> & { service: _maka_broker_v1_CapabilityBrokerServiceDefinition }
        CompleteSignInRequest: MessageTypeDefinition<_maka_broker_v1_CompleteSignInRequest, _maka_broker_v1_CompleteSignInRequest__Output>
        CompleteSignInResponse: MessageTypeDefinition<_maka_broker_v1_CompleteSignInResponse, _maka_broker_v1_CompleteSignInResponse__Output>
        ConnectRequest: MessageTypeDefinition<_maka_broker_v1_ConnectRequest, _maka_broker_v1_ConnectRequest__Output>
        ConnectResponse: MessageTypeDefinition<_maka_broker_v1_ConnectResponse, _maka_broker_v1_ConnectResponse__Output>
        ErrorReason: EnumTypeDefinition
        FailureCode: EnumTypeDefinition
        FrameRejected: MessageTypeDefinition<_maka_broker_v1_FrameRejected, _maka_broker_v1_FrameRejected__Output>
        GetStatusRequest: MessageTypeDefinition<_maka_broker_v1_GetStatusRequest, _maka_broker_v1_GetStatusRequest__Output>
        GetStatusResponse: MessageTypeDefinition<_maka_broker_v1_GetStatusResponse, _maka_broker_v1_GetStatusResponse__Output>
        InteractionReceived: MessageTypeDefinition<_maka_broker_v1_InteractionReceived, _maka_broker_v1_InteractionReceived__Output>
        InteractionRequest: MessageTypeDefinition<_maka_broker_v1_InteractionRequest, _maka_broker_v1_InteractionRequest__Output>
        InteractionResult: MessageTypeDefinition<_maka_broker_v1_InteractionResult, _maka_broker_v1_InteractionResult__Output>
        InteractionSettledEvent: MessageTypeDefinition<_maka_broker_v1_InteractionSettledEvent, _maka_broker_v1_InteractionSettledEvent__Output>
        InvocationFailure: MessageTypeDefinition<_maka_broker_v1_InvocationFailure, _maka_broker_v1_InvocationFailure__Output>
        InvocationProgress: MessageTypeDefinition<_maka_broker_v1_InvocationProgress, _maka_broker_v1_InvocationProgress__Output>
        InvocationResult: MessageTypeDefinition<_maka_broker_v1_InvocationResult, _maka_broker_v1_InvocationResult__Output>
        Invoke: MessageTypeDefinition<_maka_broker_v1_Invoke, _maka_broker_v1_Invoke__Output>
        ListSignInsRequest: MessageTypeDefinition<_maka_broker_v1_ListSignInsRequest, _maka_broker_v1_ListSignInsRequest__Output>
        ListSignInsResponse: MessageTypeDefinition<_maka_broker_v1_ListSignInsResponse, _maka_broker_v1_ListSignInsResponse__Output>
        ListToolsRequest: MessageTypeDefinition<_maka_broker_v1_ListToolsRequest, _maka_broker_v1_ListToolsRequest__Output>
        ListToolsResponse: MessageTypeDefinition<_maka_broker_v1_ListToolsResponse, _maka_broker_v1_ListToolsResponse__Output>
        ProviderHeartbeat: MessageTypeDefinition<_maka_broker_v1_ProviderHeartbeat, _maka_broker_v1_ProviderHeartbeat__Output>
        Register: MessageTypeDefinition<_maka_broker_v1_Register, _maka_broker_v1_Register__Output>
        Registered: MessageTypeDefinition<_maka_broker_v1_Registered, _maka_broker_v1_Registered__Output>
        RejectReason: EnumTypeDefinition
        ReportServersRequest: MessageTypeDefinition<_maka_broker_v1_ReportServersRequest, _maka_broker_v1_ReportServersRequest__Output>
        ReportServersResponse: MessageTypeDefinition<_maka_broker_v1_ReportServersResponse, _maka_broker_v1_ReportServersResponse__Output>
        ReporterStatus: MessageTypeDefinition<_maka_broker_v1_ReporterStatus, _maka_broker_v1_ReporterStatus__Output>
        ServerError: MessageTypeDefinition<_maka_broker_v1_ServerError, _maka_broker_v1_ServerError__Output>
        ServerState: EnumTypeDefinition
        ServerStatus: MessageTypeDefinition<_maka_broker_v1_ServerStatus, _maka_broker_v1_ServerStatus__Output>
        SignInCallback: MessageTypeDefinition<_maka_broker_v1_SignInCallback, _maka_broker_v1_SignInCallback__Output>
        SignInState: EnumTypeDefinition
        SignInStatus: MessageTypeDefinition<_maka_broker_v1_SignInStatus, _maka_broker_v1_SignInStatus__Output>
        SignOutRequest: MessageTypeDefinition<_maka_broker_v1_SignOutRequest, _maka_broker_v1_SignOutRequest__Output>
        SignOutResponse: MessageTypeDefinition<_maka_broker_v1_SignOutResponse, _maka_broker_v1_SignOutResponse__Output>
        StopRequest: MessageTypeDefinition<_maka_broker_v1_StopRequest, _maka_broker_v1_StopRequest__Output>
        StopResponse: MessageTypeDefinition<_maka_broker_v1_StopResponse, _maka_broker_v1_StopResponse__Output>
        Tool: MessageTypeDefinition<_maka_broker_v1_Tool, _maka_broker_v1_Tool__Output>
        ToolDescriptor: MessageTypeDefinition<_maka_broker_v1_ToolDescriptor, _maka_broker_v1_ToolDescriptor__Output>
        ToolsChanged: MessageTypeDefinition<_maka_broker_v1_ToolsChanged, _maka_broker_v1_ToolsChanged__Output>
        WatchCallRequest: MessageTypeDefinition<_maka_broker_v1_WatchCallRequest, _maka_broker_v1_WatchCallRequest__Output>
        WatchCallResponse: MessageTypeDefinition<_maka_broker_v1_WatchCallResponse, _maka_broker_v1_WatchCallResponse__Output>
        WatchToolsRequest: MessageTypeDefinition<_maka_broker_v1_WatchToolsRequest, _maka_broker_v1_WatchToolsRequest__Output>
        WatchToolsResponse: MessageTypeDefinition<_maka_broker_v1_WatchToolsResponse, _maka_broker_v1_WatchToolsResponse__Output>
      }
    }
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
        AnsweredBy: MessageTypeDefinition<_maka_interaction_v1_AnsweredBy, _maka_interaction_v1_AnsweredBy__Output>
        Binding: MessageTypeDefinition<_maka_interaction_v1_Binding, _maka_interaction_v1_Binding__Output>
        CloseReason: EnumTypeDefinition
        DeliveryState: EnumTypeDefinition
        ErrorReason: EnumTypeDefinition
        EventKind: EnumTypeDefinition
        Interaction: MessageTypeDefinition<_maka_interaction_v1_Interaction, _maka_interaction_v1_Interaction__Output>
        InteractionEvent: MessageTypeDefinition<_maka_interaction_v1_InteractionEvent, _maka_interaction_v1_InteractionEvent__Output>
        InteractionState: EnumTypeDefinition
        Person: MessageTypeDefinition<_maka_interaction_v1_Person, _maka_interaction_v1_Person__Output>
        PrincipalKind: EnumTypeDefinition
        Round: MessageTypeDefinition<_maka_interaction_v1_Round, _maka_interaction_v1_Round__Output>
      }
    }
  }
}

