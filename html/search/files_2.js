var searchData=
[
  ['category_2ehpp_0',['category.hpp',['../category_8hpp.html',1,'']]],
  ['checkpoint_2ehpp_1',['checkpoint.hpp',['../checkpoint_8hpp.html',1,'']]],
  ['constant_2ehpp_2',['constant.hpp',['../constant_8hpp.html',1,'']]],
  ['context_2ehpp_3',['context.hpp',['../context_8hpp.html',1,'']]],
  ['cuda_5fgraph_2ehpp_4',['cuda_graph.hpp',['../cuda__graph_8hpp.html',1,'']]]
];
