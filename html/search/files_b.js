var searchData=
[
  ['nominal_5fbatch_2ehpp_0',['nominal_batch.hpp',['../nominal__batch_8hpp.html',1,'']]],
  ['none_2ehpp_1',['none.hpp',['../accumulation_2none_8hpp.html',1,'(Global Namespace)'],['../checkpoint_2none_8hpp.html',1,'(Global Namespace)']]]
];
