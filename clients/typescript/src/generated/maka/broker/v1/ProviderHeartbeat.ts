// Original file: proto/maka/broker/v1/broker.proto


export interface ProviderHeartbeat {
}

export interface ProviderHeartbeat__Output {
}
