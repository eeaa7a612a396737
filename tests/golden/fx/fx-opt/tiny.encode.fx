def forward(self, src):
    padding_mask = attncomp_lower_ops_padding_mask(src, 0)
    logical_not = torch.logical_not(padding_mask);  padding_mask = None
    embed = self.embed(src)
    mul = torch.mul(embed, 8.0);  embed = None
    size = src.size(1);  src = None
    getattr_1 = mul.device
    arange = torch.arange(0, size, device = getattr_1);  size = getattr_1 = None
    getattr_2 = mul.dtype
    sinusoidal = attncomp_lower_ops_sinusoidal(arange, 64, getattr_2);  arange = getattr_2 = None
    add = torch.add(mul, sinusoidal);  mul = sinusoidal = None
    encoder_layers_0_self_attn_q_proj_weight = getattr(self.encoder.layers, "0").self_attn.q_proj.weight
    encoder_layers_0_self_attn_k_proj_weight = getattr(self.encoder.layers, "0").self_attn.k_proj.weight
    encoder_layers_0_self_attn_v_proj_weight = getattr(self.encoder.layers, "0").self_attn.v_proj.weight
    cat = torch.cat((encoder_layers_0_self_attn_q_proj_weight, encoder_layers_0_self_attn_k_proj_weight, encoder_layers_0_self_attn_v_proj_weight));  encoder_layers_0_self_attn_q_proj_weight = encoder_layers_0_self_attn_k_proj_weight = encoder_layers_0_self_attn_v_proj_weight = None
    linear = torch._C._nn.linear(add, cat, None);  cat = None
    split = torch.functional.split(linear, (64, 64, 64), -1);  linear = None
    getitem = split[0]
    getitem_1 = split[1]
    getitem_2 = split[2];  split = None
    unflatten = torch.unflatten(getitem_1, -1, (4, 16));  getitem_1 = None
    transpose = torch.transpose(unflatten, 1, 2);  unflatten = None
    unflatten_1 = torch.unflatten(getitem_2, -1, (4, 16));  getitem_2 = None
    transpose_1 = torch.transpose(unflatten_1, 1, 2);  unflatten_1 = None
    unflatten_2 = torch.unflatten(getitem, -1, (4, 16));  getitem = None
    transpose_2 = torch.transpose(unflatten_2, 1, 2);  unflatten_2 = None
    scaled_dot_product_attention = torch._C._nn.scaled_dot_product_attention(transpose_2, transpose, transpose_1, scale = 0.25, attn_mask = logical_not);  transpose_2 = transpose = transpose_1 = None
    transpose_4 = torch.transpose(scaled_dot_product_attention, 1, 2);  scaled_dot_product_attention = None
    flatten = torch.flatten(transpose_4, -2);  transpose_4 = None
    encoder_layers_0_self_attn_o_proj = getattr(self.encoder.layers, "0").self_attn.o_proj(flatten);  flatten = None
    add_1 = torch.add(add, encoder_layers_0_self_attn_o_proj);  add = encoder_layers_0_self_attn_o_proj = None
    encoder_layers_0_self_attn_norm = getattr(self.encoder.layers, "0").self_attn_norm(add_1);  add_1 = None
    encoder_layers_0_ffn_fc1 = getattr(self.encoder.layers, "0").ffn.fc1(encoder_layers_0_self_attn_norm)
    relu = torch.relu(encoder_layers_0_ffn_fc1);  encoder_layers_0_ffn_fc1 = None
    encoder_layers_0_ffn_fc2 = getattr(self.encoder.layers, "0").ffn.fc2(relu);  relu = None
    add_2 = torch.add(encoder_layers_0_self_attn_norm, encoder_layers_0_ffn_fc2);  encoder_layers_0_self_attn_norm = encoder_layers_0_ffn_fc2 = None
    encoder_layers_0_ffn_norm = getattr(self.encoder.layers, "0").ffn_norm(add_2);  add_2 = None
    encoder_layers_1_self_attn_q_proj_weight = getattr(self.encoder.layers, "1").self_attn.q_proj.weight
    encoder_layers_1_self_attn_k_proj_weight = getattr(self.encoder.layers, "1").self_attn.k_proj.weight
    encoder_layers_1_self_attn_v_proj_weight = getattr(self.encoder.layers, "1").self_attn.v_proj.weight
    cat_1 = torch.cat((encoder_layers_1_self_attn_q_proj_weight, encoder_layers_1_self_attn_k_proj_weight, encoder_layers_1_self_attn_v_proj_weight));  encoder_layers_1_self_attn_q_proj_weight = encoder_layers_1_self_attn_k_proj_weight = encoder_layers_1_self_attn_v_proj_weight = None
    linear_1 = torch._C._nn.linear(encoder_layers_0_ffn_norm, cat_1, None);  cat_1 = None
    split_1 = torch.functional.split(linear_1, (64, 64, 64), -1);  linear_1 = None
    getitem_3 = split_1[0]
    getitem_4 = split_1[1]
    getitem_5 = split_1[2];  split_1 = None
    unflatten_3 = torch.unflatten(getitem_4, -1, (4, 16));  getitem_4 = None
    transpose_5 = torch.transpose(unflatten_3, 1, 2);  unflatten_3 = None
    unflatten_4 = torch.unflatten(getitem_5, -1, (4, 16));  getitem_5 = None
    transpose_6 = torch.transpose(unflatten_4, 1, 2);  unflatten_4 = None
    unflatten_5 = torch.unflatten(getitem_3, -1, (4, 16));  getitem_3 = None
    transpose_7 = torch.transpose(unflatten_5, 1, 2);  unflatten_5 = None
    scaled_dot_product_attention_1 = torch._C._nn.scaled_dot_product_attention(transpose_7, transpose_5, transpose_6, scale = 0.25, attn_mask = logical_not);  transpose_7 = transpose_5 = transpose_6 = logical_not = None
    transpose_9 = torch.transpose(scaled_dot_product_attention_1, 1, 2);  scaled_dot_product_attention_1 = None
    flatten_1 = torch.flatten(transpose_9, -2);  transpose_9 = None
    encoder_layers_1_self_attn_o_proj = getattr(self.encoder.layers, "1").self_attn.o_proj(flatten_1);  flatten_1 = None
    add_3 = torch.add(encoder_layers_0_ffn_norm, encoder_layers_1_self_attn_o_proj);  encoder_layers_0_ffn_norm = encoder_layers_1_self_attn_o_proj = None
    encoder_layers_1_self_attn_norm = getattr(self.encoder.layers, "1").self_attn_norm(add_3);  add_3 = None
    encoder_layers_1_ffn_fc1 = getattr(self.encoder.layers, "1").ffn.fc1(encoder_layers_1_self_attn_norm)
    relu_1 = torch.relu(encoder_layers_1_ffn_fc1);  encoder_layers_1_ffn_fc1 = None
    encoder_layers_1_ffn_fc2 = getattr(self.encoder.layers, "1").ffn.fc2(relu_1);  relu_1 = None
    add_4 = torch.add(encoder_layers_1_self_attn_norm, encoder_layers_1_ffn_fc2);  encoder_layers_1_self_attn_norm = encoder_layers_1_ffn_fc2 = None
    encoder_layers_1_ffn_norm = getattr(self.encoder.layers, "1").ffn_norm(add_4);  add_4 = None
    return encoder_layers_1_ffn_norm
    