var searchData=
[
  ['fashion_5fmnist_2ehpp_0',['fashion_mnist.hpp',['../fashion__mnist_8hpp.html',1,'']]],
  ['format_2ehpp_1',['format.hpp',['../format_8hpp.html',1,'']]],
  ['fp32_2ehpp_2',['fp32.hpp',['../fp32_8hpp.html',1,'']]],
  ['fused_5fadam_2ehpp_3',['fused_adam.hpp',['../fused__adam_8hpp.html',1,'']]],
  ['fused_5fadamw_2ehpp_4',['fused_adamw.hpp',['../fused__adamw_8hpp.html',1,'']]],
  ['fused_5fcommon_2ehpp_5',['fused_common.hpp',['../fused__common_8hpp.html',1,'']]],
  ['fused_5fsgd_2ehpp_6',['fused_sgd.hpp',['../fused__sgd_8hpp.html',1,'']]]
];
